"""The job commands of `flux`: submit, run, bulksubmit, batch, alloc, jobs, job, cancel, queue, proxy.

Kept free of click (see options.py) and of zmq (see lean.py); each command's module is imported only when that
command runs (submit_cmds.py, job_cmds.py, queue_proxy.py), so `flux run true` loads what running a job needs.
Exit codes follow Flux: 0 success, 1 errors, a job's own exit code for run/alloc/attach, 2 bad usage.
"""

from __future__ import annotations

import sys

from .jobcli_common import EXIT_USAGE, CommandError, _flux_error
from .options import OptionError, usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from .options import Opt


def command(name: str) -> Callable[[list[str]], int]:
    """The command's function, its module imported now (`flux run` need not load `flux jobs`'s formatting)."""
    found: Callable[[list[str]], int]
    if name in ("submit", "run", "bulksubmit", "batch", "alloc"):
        from . import submit_cmds

        found = getattr(submit_cmds, f"cmd_{name}")
        return found
    if name in ("jobs", "job", "cancel"):
        from . import job_cmds

        found = getattr(job_cmds, f"cmd_{name}")
        return found
    if name in ("queue", "proxy"):
        from . import queue_proxy

        found = getattr(queue_proxy, f"cmd_{name}")
        return found
    raise KeyError(name)


SUMMARIES = {
    "submit": "submit a job; print its id",
    "run": "submit a job and wait for it, relaying its output",
    "bulksubmit": "submit one job per combination of inputs (COMMAND ::: ARGS)",
    "batch": "submit a batch script run in a sub-instance",
    "alloc": "run a command in a new sub-instance and wait for it",
    "jobs": "list jobs (active ones unless -a)",
    "job": "job details: attach, info, status, wait, last, list, urgency, cancel, kill; id converts job ids",
    "cancel": "cancel jobs",
    "queue": "queue status, start/stop, enable/disable, idle/drain, policy, save",
    "proxy": "run a command (default a shell) connected to a job's sub-instance",
}
USAGES = {
    "submit": "submit [OPTIONS] COMMAND...",
    "run": "run [OPTIONS] COMMAND...",
    "bulksubmit": "bulksubmit [OPTIONS] COMMAND {} ::: ARGS...",
    "batch": "batch [OPTIONS] SCRIPT | --wrap COMMAND...",
    "alloc": "alloc [OPTIONS] COMMAND...",
    "jobs": "jobs [OPTIONS] [JOBID...]",
    "job": "job attach|info|status|wait|last|list|urgency|cancel|kill|id ...",
    "cancel": "cancel [OPTIONS] JOBID...",
    "queue": "queue [OPTIONS] status|start|stop|enable|disable|idle|drain|policy [fcfs|easy]|save ARCHIVE",
    "proxy": "proxy JOBID|URI [COMMAND...]",
}


def help_options(name: str) -> list[Opt]:
    """Each command's own options (before, `flux jobs --help` showed submit's)."""
    from .job_cmds import CANCEL_OPTS, JOBS_OPTS
    from .queue_proxy import QUEUE_OPTS
    from .submit import SUBMIT_OPTS
    from .submit_cmds import BATCH_OPTS

    return {"batch": BATCH_OPTS, "jobs": JOBS_OPTS, "cancel": CANCEL_OPTS, "queue": QUEUE_OPTS}.get(
        name, SUBMIT_OPTS if name in ("submit", "run", "bulksubmit", "alloc") else []
    )


def main(name: str, argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(usage(USAGES[name], SUMMARIES[name], help_options(name)))
        return 0
    error = _flux_error()
    try:
        return command(name)(argv)
    except OptionError as exc:
        print(f"flux-{name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except CommandError as exc:
        print(f"flux-{name}: {exc}", file=sys.stderr)
        return 1
    except error as exc:
        print(f"flux-{name}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
