"""Flux job ids: 64-bit FLUIDs, printed in F58 (`ƒ2H5FBf9Mq`) and accepted in Flux's other spellings.

A FLUID is 40 bits of milliseconds since the generator's epoch, 14 bits of generator id and 10 bits of
sequence, so ids sort by submission time and never repeat across a restart that keeps the epoch.
"""

from __future__ import annotations

import time

from broker.errors import InputError

F58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
F58_PREFIX = "ƒ"
F58_ASCII_PREFIX = "f"
_TIMESTAMP_BITS, _GENERATOR_BITS, _SEQUENCE_BITS = 40, 14, 10
_MAX_SEQUENCE = (1 << _SEQUENCE_BITS) - 1


class JobIdError(InputError):
    """Text that is not a job id in any Flux spelling."""


_MAX_JOBID = (1 << 64) - 1
_MAX_F58_DIGITS = 12  # flux-core refuses longer F58 (58**12 > 2**64)
ENCODINGS = ("dec", "hex", "dothex", "kvs", "words", "f58", "f58plain", "emoji")  # flux_job_id_encode's
_DECIMAL = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
TABLE_ENCODINGS = ("words", "emoji")
"""Spellings drawn from flux-core's own word and emoji tables, which we do not copy: refused with a reason."""


def table_encoding_refusal(kind: str) -> str:
    return (
        f"the {kind} spelling of job ids needs flux-core's {kind} table, which the built-in flux does not carry"
        " (use dec, hex, dothex, kvs, f58 or f58plain)"
    )


def encode_f58(jobid: int, prefix: str = F58_PREFIX) -> str:
    if jobid < 0:
        raise JobIdError(f"job id {jobid} is negative")
    digits = ""
    value = jobid
    while True:
        value, rest = divmod(value, 58)
        digits = F58_ALPHABET[rest] + digits
        if value == 0:
            break
    return prefix + digits


def f58_prefix() -> str:
    """flux-core's F58 prefix: `ƒ` in a UTF-8 locale unless $FLUX_F58_FORCE_ASCII is set, else `f`."""
    import locale
    import os

    if os.environ.get("FLUX_F58_FORCE_ASCII") or locale.nl_langinfo(locale.CODESET) != "UTF-8":
        return F58_ASCII_PREFIX
    return F58_PREFIX


def encode_jobid(jobid: int, to: str) -> str:
    """`jobid` spelled as flux_job_id_encode spells it; `to` is one of ENCODINGS (any case)."""
    if not 0 <= jobid <= _MAX_JOBID:
        raise JobIdError(f"job id {jobid} does not fit in 64 bits")
    kind = to.lower()
    if kind == "dec":
        return str(jobid)
    if kind == "hex":
        return f"{jobid:#x}"
    if kind in ("dothex", "kvs"):
        text = ".".join(f"{(jobid >> shift) & 0xFFFF:04x}" for shift in (48, 32, 16, 0))
        return "job." + text if kind == "kvs" else text
    if kind in ("f58", "f58plain"):
        return encode_f58(jobid, F58_ASCII_PREFIX if kind == "f58plain" else f58_prefix())
    if kind in TABLE_ENCODINGS:
        raise JobIdError(table_encoding_refusal(kind))
    raise JobIdError(f"unknown encoding {to!r} (expected one of {', '.join(ENCODINGS)})")


def _decode_f58(text: str) -> int:
    if not text or len(text) > _MAX_F58_DIGITS:
        raise JobIdError("an F58 id has 1 to 12 digits")
    value = 0
    for char in text:
        index = F58_ALPHABET.find(char)
        if index < 0:
            raise JobIdError(f"{char!r} is not an F58 digit")
        value = value * 58 + index
    return value & _MAX_JOBID  # flux-core's arithmetic wraps at 64 bits


def _decode_dothex(text: str) -> int:
    parts = text.split(".")
    if len(parts) != 4 or not all(0 < len(part) <= 4 and _HEX.issuperset(part) for part in parts):
        raise JobIdError("dothex is four groups of 1-4 hex digits")
    value = 0
    for part in parts:
        value = (value << 16) | int(part, 16)
    return value


def parse_jobid(text: str) -> int:
    """Any spelling flux_job_id_parse accepts: decimal, 0x hex, dothex (optionally `job.`-prefixed, as in the
    KVS) or F58 (`ƒ...` or `f...`); words and emoji are recognised and refused (see TABLE_ENCODINGS). Told apart
    in flux-core's order: `.` means dothex, `-` words, then the F58 prefix, then emoji; anything else is a number."""
    stripped = text.strip()
    body = stripped.removeprefix("job.")
    try:
        if "." in body:
            return _decode_dothex(body)
        if "-" in body:
            raise JobIdError(table_encoding_refusal("words"))
        if body.startswith(F58_PREFIX):
            return _decode_f58(body[len(F58_PREFIX) :])
        if body.startswith(F58_ASCII_PREFIX):
            return _decode_f58(body[len(F58_ASCII_PREFIX) :])
        if body[:1] and 0x1F000 <= ord(body[0]) <= 0x1FFFF:
            raise JobIdError(table_encoding_refusal("emoji"))
        if _is_number(body):
            number = int(body, 16 if body.startswith("0x") else 10)
            if number > _MAX_JOBID:
                raise JobIdError("it does not fit in 64 bits")
            return number
    except JobIdError as exc:
        raise JobIdError(f"{stripped!r} is not a job id: {exc}") from None
    raise JobIdError(f"{stripped!r} is not a job id (expected e.g. ƒ2H5FBf9Mq, f2H5FBf9Mq or a decimal id)")


def _is_number(text: str) -> bool:
    """Decimal digits, or 0x and hex digits (ASCII only; no `re`: the job CLI's start-up does without it)."""
    if text.startswith("0x"):
        return len(text) > 2 and _HEX.issuperset(text[2:])
    return bool(text) and _DECIMAL.issuperset(text)


class FluidGenerator:
    """Thread-safe FLUID generator for one generator id (the lead uses its rank, 0)."""

    def __init__(self, generator_id: int = 0, epoch_ms: int = 0) -> None:
        if not 0 <= generator_id < (1 << _GENERATOR_BITS):
            raise ValueError(f"generator id {generator_id} out of range")
        self.generator_id = generator_id
        self.epoch_ms = epoch_ms
        import threading  # here: the job CLI, which only spells ids, starts without it

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
