"""What the job commands of `flux` share: the connection, errors, job ids, and following a job's output."""

from __future__ import annotations

import sys

from ..errors import BrokerBaseError
from ..jobs.jobid import JobIdError, encode_f58

TYPE_CHECKING = False  # `flux run` and `flux submit` import this module: no typing, no job API at start-up
if TYPE_CHECKING:
    from typing import Any

    from ..jobs.api import JobClient, JobInfo, RpcHandle
    from ..jobs.shapes import JobInfoRecord
    from .option_values import OptionValues

EXIT_USAGE = 2


class CommandError(BrokerBaseError):
    """A failure to report as `flux-CMD: message` with exit code 1."""


def _client() -> JobClient:
    from ..jobs.api import JobClient
    from .lean import connect

    return JobClient(handle=connect())


def _flux_error() -> type[Exception]:
    from ..errors import FluxError

    return FluxError


def exit_code(returncode: int | None, success: bool) -> int:
    """A finished job's exit code as `flux run` and `flux job status` return it."""
    if returncode is not None:
        return returncode if returncode or success else 1
    return 0 if success else 1


def _exit_code(info: JobInfo) -> int:
    return exit_code(info.returncode, info.success)


def _report_exception(info: JobInfoRecord) -> None:
    """From the job's view as the broker sends it (JobInfo.from_dict reads the same fields)."""
    exception = info.get("exception") or {}
    if exception.get("type"):
        print(
            f"flux-job: {encode_f58(int(info['id']))}: job.exception type={exception['type']} severity=0 "
            f"{exception.get('note', '')}",
            file=sys.stderr,
        )


def _redirected(values: OptionValues) -> frozenset[str]:
    """Streams that go to files instead of the terminal: as in Flux, --output takes stderr too unless --error."""
    streams = set()
    if values.get("output"):
        streams.add("stdout")
        if not values.get("error"):
            streams.add("stderr")
    if values.get("error"):
        streams.add("stderr")
    return frozenset(streams)


def _attach(handle: RpcHandle, jobid: int, label: bool, redirected: frozenset[str] = frozenset()) -> int:
    """Stream the job's output here until it ends (except streams sent to files); its exit code becomes ours."""
    offset = 0
    while True:
        reply = handle.rpc("job-manager.output", {"id": jobid, "offset": offset, "wait": True}, -1, None)
        _print_lines([line for line in reply["lines"] if line[0] not in redirected], label)
        offset = int(reply["offset"])
        if reply["eof"]:
            info: JobInfoRecord = reply["info"]
            _report_exception(info)
            return exit_code(info.get("returncode"), info.get("result") == "COMPLETED")  # as JobInfo.success


def _print_lines(lines: list[list[Any]], label: bool) -> None:
    """Output lines as job-manager.output sends them: [stream, task, text]."""
    out: list[str] = []
    err: list[str] = []
    for stream, task, text in lines:
        (out if stream == "stdout" else err).append(f"{task}: {text}" if label else text)
    if out:
        sys.stdout.write("".join(out))
        sys.stdout.flush()
    if err:
        sys.stderr.write("".join(err))
        sys.stderr.flush()


def _jobid(text: str) -> int:
    from ..jobs.api import as_jobid

    try:
        return as_jobid(text)
    except JobIdError as exc:
        raise CommandError(str(exc)) from None
