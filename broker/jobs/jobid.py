"""Flux job ids: 64-bit FLUIDs, printed in F58 (`ƒ2H5FBf9Mq`) and accepted in Flux's other spellings.

A FLUID is 40 bits of milliseconds since the generator's epoch, 14 bits of generator id and 10 bits of
sequence, so ids sort by submission time and never repeat across a restart that keeps the epoch.
"""

from __future__ import annotations

import threading
import time

F58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
F58_PREFIX = "ƒ"
F58_ASCII_PREFIX = "f"
_TIMESTAMP_BITS, _GENERATOR_BITS, _SEQUENCE_BITS = 40, 14, 10
_MAX_SEQUENCE = (1 << _SEQUENCE_BITS) - 1


class JobIdError(ValueError):
    """Text that is not a job id in any Flux spelling."""


def encode_f58(jobid: int) -> str:
    if jobid < 0:
        raise JobIdError(f"job id {jobid} is negative")
    digits = ""
    value = jobid
    while True:
        value, rest = divmod(value, 58)
        digits = F58_ALPHABET[rest] + digits
        if value == 0:
            break
    return F58_PREFIX + digits


def _decode_f58(text: str) -> int:
    value = 0
    for char in text:
        index = F58_ALPHABET.find(char)
        if index < 0:
            raise JobIdError(f"{char!r} is not an F58 digit")
        value = value * 58 + index
    return value


def parse_jobid(text: str) -> int:
    """Decimal, F58 (`ƒ...` or `f...`), hex (`0x...`) or dothex (`0000.0000.0000.0000`)."""
    text = text.strip()
    try:
        if text.startswith(F58_PREFIX):
            return _decode_f58(text[len(F58_PREFIX) :])
        if text.startswith(F58_ASCII_PREFIX) and len(text) > 1:
            return _decode_f58(text[1:])
        if text.lower().startswith("0x"):
            return int(text, 16)
        if text.count(".") == 3:
            return int(text.replace(".", ""), 16)
        if text.isdigit():
            return int(text)
    except (ValueError, JobIdError) as exc:
        raise JobIdError(f"{text!r} is not a job id") from exc
    raise JobIdError(f"{text!r} is not a job id (expected e.g. ƒ2H5FBf9Mq, f2H5FBf9Mq or a decimal id)")


class FluidGenerator:
    """Thread-safe FLUID generator for one generator id (the lead uses its rank, 0)."""

    def __init__(self, generator_id: int = 0, epoch_ms: int = 0) -> None:
        if not 0 <= generator_id < (1 << _GENERATOR_BITS):
            raise ValueError(f"generator id {generator_id} out of range")
        self.generator_id = generator_id
        self.epoch_ms = epoch_ms
        self._lock = threading.Lock()
        self._last_ms = -1
        self._sequence = 0

    def _now_ms(self) -> int:
        return int(time.time() * 1000) - self.epoch_ms

    def next(self, not_before: int = 0) -> int:
        """A new id, greater than every id issued before and than `not_before` (e.g. the journal's last)."""
        with self._lock:
            now = max(self._now_ms(), self._last_ms, (not_before >> (_GENERATOR_BITS + _SEQUENCE_BITS)))
            if now == self._last_ms:
                self._sequence += 1
                if self._sequence > _MAX_SEQUENCE:
                    now += 1
                    self._sequence = 0
            else:
                self._sequence = 0
            self._last_ms = now
            jobid = (now << (_GENERATOR_BITS + _SEQUENCE_BITS)) | (self.generator_id << _SEQUENCE_BITS) | self._sequence
            if jobid <= not_before:
                self._last_ms = (not_before >> (_GENERATOR_BITS + _SEQUENCE_BITS)) + 1
                self._sequence = 0
                jobid = (self._last_ms << (_GENERATOR_BITS + _SEQUENCE_BITS)) | (self.generator_id << _SEQUENCE_BITS)
            return jobid
