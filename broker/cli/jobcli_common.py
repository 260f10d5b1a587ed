"""What the job commands of `flux` share: the connection, errors, job ids, and following a job's output."""

from __future__ import annotations

import sys
from typing import Any

from ..errors import BrokerBaseError
from ..jobs.api import JobClient, JobInfo, OutputLine, as_jobid
from ..jobs.jobid import JobIdError
from .options import OptionError

EXIT_USAGE = 2


class CommandError(BrokerBaseError):
    """A failure to report as `flux-CMD: message` with exit code 1."""


def _client() -> JobClient:
    from .lean import connect

    return JobClient(handle=connect())


def _flux_error() -> type[Exception]:
    from ..errors import FluxError

    return FluxError


def _idset(text: str) -> list[int]:
    from .. import idset

    try:
        return idset.decode(text)
    except ValueError as exc:
        raise OptionError(str(exc)) from None


def _exit_code(info: JobInfo) -> int:
    if info.returncode is not None:
        return info.returncode if info.returncode or info.success else 1
    return 0 if info.success else 1


def _report_exception(info: JobInfo) -> None:
    if info.exception_type:
        print(
            f"flux-job: {info.f58}: job.exception type={info.exception_type} severity=0 {info.exception_note}",
            file=sys.stderr,
        )


def _redirected(values: dict[str, Any]) -> frozenset[str]:
    """Streams that go to files instead of the terminal: as in Flux, --output takes stderr too unless --error."""
    streams = set()
    if values.get("output"):
        streams.add("stdout")
        if not values.get("error"):
            streams.add("stderr")
    if values.get("error"):
        streams.add("stderr")
    return frozenset(streams)


def _attach(client: JobClient, jobid: int, label: bool, redirected: frozenset[str] = frozenset()) -> int:
    """Stream the job's output here until it ends (except streams sent to files); its exit code becomes ours."""
    offset = 0
    while True:
        reply = client.handle.rpc("job-manager.output", {"id": jobid, "offset": offset, "wait": True}, -1, None)
        lines = [OutputLine(s, t, x) for s, t, x in reply["lines"] if s not in redirected]
        _print_lines(lines, label)
        offset = int(reply["offset"])
        if reply["eof"]:
            info = JobInfo.from_dict(reply["info"])
            _report_exception(info)
            return _exit_code(info)


def _print_lines(lines: list[OutputLine], label: bool) -> None:
    out: list[str] = []
    err: list[str] = []
    for line in lines:
        text = f"{line.task}: {line.text}" if label else line.text
        (out if line.stream == "stdout" else err).append(text)
    if out:
        sys.stdout.write("".join(out))
        sys.stdout.flush()
    if err:
        sys.stderr.write("".join(err))
        sys.stderr.flush()


def _jobid(text: str) -> int:
    try:
        return as_jobid(text)
    except JobIdError as exc:
        raise CommandError(str(exc)) from None
