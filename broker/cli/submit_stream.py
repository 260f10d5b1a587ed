"""Many submissions as a stream: each jobspec is built, encoded and sent as the submission goes, SUBMIT_WINDOW of
them in flight, and the ids are written as their answers come.

Why: `flux submit --cc=1-100000000 true` used to list every id, then build every jobspec, before sending the
first (4.1 GB after 48 s, nothing submitted). Now the client's memory is the window's, the first job is
accepted at once, and a refusal (the queue's limit, job-manager.active-num-limit) stops the stream: the jobs
accepted before it stay accepted and their ids are printed; nothing else is sent.

Lean like the rest of `flux submit` (tests/broker/test_broker_lean_imports.py): no typing, json or re here.
"""

from __future__ import annotations

import os
import sys
import time

from ..errors import FluxError
from .jobcli_common import CommandError
from .lean import wire_json
from .options import as_int
from .submit import submit_flag_bits

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import TextIO

    from ..jobs.api import RpcHandle
    from ..jobs.shapes import Jobspec
    from ..rest.topics import SubmitPayload
    from .option_values import OptionValues

SUBMIT_WINDOW = 256
"""Submissions in flight: enough to keep the broker busy, few enough to bound both queues and our memory."""


class SubmitStopped(CommandError):
    """The broker refused a submission: the stream stopped there; `accepted` jobs were submitted before."""

    def __init__(self, error: FluxError, accepted: int, total: int) -> None:
        super().__init__(f"{error} ({accepted} of {total} jobs submitted)" if total > 1 else str(error))
        self.accepted = accepted


def render(accepted: int, total: int, elapsed: float) -> str:
    """The progress line (pure): `Submitting 2000 jobs:  1500 accepted  75.0%  3s`."""
    percent = 100.0 * accepted / total if total else 100.0
    return f"Submitting {total} jobs: {accepted:>{len(str(total))}} accepted {percent:5.1f}% {elapsed:4.0f}s"


class Progress:
    """A line on stderr counting the accepted jobs, for a terminal only (a pipe or a file gets no control
    characters): drawn once a submission of several jobs has taken half a second (at once with --progress),
    redrawn at most 4 times a second, left in place at the end with the final count."""

    FIRST = 0.5
    EVERY = 0.25

    def __init__(
        self, total: int, stream: TextIO, first: float = FIRST, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.total = total
        self.stream = stream
        self.first = first
        self.clock = clock
        self.started = clock()
        self.drawn_at: float | None = None

    @classmethod
    def on_terminal(cls, total: int, asked: bool) -> Progress | None:
        """For `flux submit` (`asked`: --progress), or None when stderr is not a terminal."""
        if not sys.stderr.isatty() or not (asked or total > 1):
            return None
        return cls(total, sys.stderr, first=0.0 if asked else cls.FIRST)

    def update(self, accepted: int, final: bool = False) -> None:
        now = self.clock()
        if not final and (
            now - self.started < self.first or (self.drawn_at is not None and now - self.drawn_at < self.EVERY)
        ):
            return
        if final and self.drawn_at is None:
            return  # a submission too quick to have shown a line leaves none
        self.stream.write("\r\x1b[K" + render(accepted, self.total, now - self.started) + ("\n" if final else ""))
        self.stream.flush()
        self.drawn_at = now

    def clear(self) -> None:
        """Before other output to the terminal: take the line away (the next update draws it again)."""
        if self.drawn_at is not None:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def submit_one(handle: RpcHandle, jobspec: Jobspec, values: OptionValues) -> int:
    """One submission, one round trip: `flux run`, `batch`, `alloc` and a submit without copies."""
    return int(handle.rpc("job-manager.submit", dict(_payload(jobspec, _fields(values))))["id"])


def submit_stream(
    handle: RpcHandle,
    jobspecs: Iterable[Jobspec],
    total: int,
    values: OptionValues,
    took: Callable[[list[int]], None],
    progress: Progress | None = None,
) -> int:
    """Send the jobspecs as `jobspecs` yields them, SUBMIT_WINDOW ahead of their answers; `took` gets the ids in
    order, a window's worth at a time. Returns how many were accepted; raises SubmitStopped at the first
    refusal, once the answers to what was already sent are in (and their ids given to `took`)."""
    send, wait = handle.send_request, handle.wait  # type: ignore[attr-defined]
    send_encoded = getattr(handle, "send_encoded", None)
    encoded: tuple[object, bytes] | None = None  # the last spec and its encoding: --cc without {cc} shares one
    pending: list[int] = []  # tags in flight, oldest first from `first`
    first = 0
    ids: list[int] = []
    accepted = 0
    refused: FluxError | None = None

    def answer(tag: int) -> None:
        nonlocal accepted, refused
        try:
            ids.append(int(wait(tag)["id"]))
            accepted += 1
        except FluxError as exc:
            refused = refused or exc

    def hand_over() -> None:
        if progress is not None:
            progress.clear()
        took(ids[:])
        ids.clear()
        if progress is not None:
            progress.update(accepted)

    fields = _fields(values)
    for spec in jobspecs:
        if len(pending) - first >= SUBMIT_WINDOW:
            answer(pending[first])
            first += 1
            if refused is not None:
                break
            if first >= SUBMIT_WINDOW:  # the answered tags go: the list stays a window long
                del pending[:first]
                first = 0
                hand_over()
        payload = _payload(spec, fields)
        if send_encoded is None:
            pending.append(send("job-manager.submit", payload))
            continue
        if encoded is None or encoded[0] is not spec:
            encoded = (spec, wire_json("job-manager.submit", payload))
        pending.append(send_encoded("job-manager.submit", encoded[1]))
    for tag in pending[first:]:
        answer(tag)
    hand_over()
    if progress is not None:
        progress.update(accepted, final=True)
    if refused is not None:
        raise SubmitStopped(refused, accepted, total)
    return accepted


def _fields(values: OptionValues) -> tuple[int, int, int]:
    """The urgency, user and submit flag bits every submission of one command sends beside its jobspec."""
    return as_int(values, "urgency", 16) or 0, os.getuid(), submit_flag_bits(values)


def _payload(jobspec: Jobspec, fields: tuple[int, int, int]) -> SubmitPayload:
    urgency, userid, flags = fields
    return {"jobspec": jobspec, "urgency": urgency, "userid": userid, "flags": flags}
