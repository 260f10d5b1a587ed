"""`flux job ...`, `flux cancel` and `flux jobs`: reading and acting on jobs through the job API."""

from __future__ import annotations

import errno
import json
import signal
import sys
from collections.abc import Callable

from ..errors import FluxError
from ..jobs.api import JobClient, JobInfo
from ..jobs.jobid import (
    ENCODINGS,
    TABLE_ENCODINGS,
    JobIdError,
    encode_f58,
    encode_jobid,
    parse_jobid,
    table_encoding_refusal,
)
from .jobcli_common import EXIT_USAGE, CommandError, _attach, _client, _exit_code, _flux_error, _jobid
from .jobs_format import DEFAULT_FORMAT, format_rows
from .options import Opt, OptionError, as_int, parse, usage


def cmd_job(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("Usage: flux job attach|wait|status|info|eventlog|cancel|kill|urgency|last|list|id [ARGS]")
        return 0 if argv else EXIT_USAGE
    sub, rest = argv[0], argv[1:]
    handlers: dict[str, Callable[[list[str]], int]] = {
        "attach": _job_attach,
        "wait": _job_wait,
        "status": _job_status,
        "info": _job_info,
        "eventlog": _job_eventlog,
        "cancel": cmd_cancel,
        "kill": _job_kill,
        "urgency": _job_urgency,
        "list": _job_list,
        "last": _job_last,
        "id": _job_id,
    }
    if sub not in handlers:
        raise OptionError(
            f"flux job {sub}: not supported (try attach, wait, status, info, eventlog, cancel, kill, urgency, last, id)"
        )
    return handlers[sub](rest)


def _job_attach(argv: list[str]) -> int:
    values, args = parse(argv, [Opt(("-l", "--label-io"), "label", "flag")], interleave=True)
    if len(args) != 1:
        raise OptionError("usage: flux job attach [--label-io] JOBID")
    with _client() as client:
        return _attach(client.handle, _jobid(args[0]), bool(values.get("label")))


def _job_wait(argv: list[str]) -> int:
    """flux-core's `flux job wait`: JOBID, or the next waitable job (printing its id), or --all waitable jobs;
    2 when there is no waitable job to wait for, 1 when a job failed."""
    values, args = parse(argv, [Opt(("-a", "--all"), "all", "flag"), Opt(("-v", "--verbose"), "v", "flag")], True)
    if len(args) > 1:
        raise OptionError("usage: flux job wait [--all] [-v] [JOBID]")
    if args and values.get("all"):
        raise OptionError("jobid not supported with --all")
    with _client() as client:
        if args:
            info = client.wait(_jobid(args[0]), take=True)
            if not info.success:
                print(f"flux-job: {_failure_text(info)}", file=sys.stderr)
                return 1
            return 0
        if not values.get("all"):
            try:
                info = client.wait_any()
            except FluxError as exc:
                print(f"flux-job: {exc}", file=sys.stderr)
                return 2 if exc.errno == errno.ECHILD else 1
            print(info.f58)
            if not info.success:
                print(f"flux-job: {_failure_text(info)}", file=sys.stderr)
                return 1
            return 0
        failed = False
        while True:
            try:
                info = client.wait_any()
            except FluxError as exc:
                if exc.errno == errno.ECHILD:
                    return 1 if failed else 0
                raise
            if not info.success:
                failed = True
                print(f"{info.f58}: {_failure_text(info)}", file=sys.stderr)
            elif values.get("v"):
                print(f"{info.f58}: job completed successfully", file=sys.stderr)


def _failure_text(info: JobInfo) -> str:
    """As flux-core's job-manager words a failed wait."""
    if info.exception_type:
        return f"Fatal exception type={info.exception_type} {info.exception_note}"
    code = info.returncode or 0
    if code > 128:
        return f"task(s) {signal.strsignal(code - 128)}"
    return f"task(s) exited with exit code {code}"


def _job_status(argv: list[str]) -> int:
    with _client() as client:
        worst = 0
        for text in argv:
            info = client.wait(_jobid(text))
            worst = max(worst, _exit_code(info))
        return worst


def _job_info(argv: list[str]) -> int:
    if not argv:
        raise OptionError("usage: flux job info JOBID [jobspec]")
    with _client() as client:
        jobid = _jobid(argv[0])
        if len(argv) > 1 and argv[1] == "jobspec":
            print(json.dumps(client.jobspec(jobid)))
        else:
            print(json.dumps(client.info(jobid).to_restful()))
    return 0


def _job_eventlog(argv: list[str]) -> int:
    values, args = parse(argv, [Opt(("-f", "--follow"), "follow", "flag")], interleave=True)
    if len(args) != 1:
        raise OptionError("usage: flux job eventlog [--follow] JOBID")
    with _client() as client:
        for event in client.events(_jobid(args[0]), follow=bool(values.get("follow"))):
            context = " ".join(f"{k}={json.dumps(v)}" for k, v in event["context"].items() if k != "jobspec")
            print(f"{event['timestamp']:.6f} {event['name']} {context}".rstrip(), flush=True)
    return 0


def _job_kill(argv: list[str]) -> int:
    values, args = parse(argv, [Opt(("-s", "--signal"), "signal")], interleave=True)
    name = values.get("signal", "SIGTERM")
    spelled = name.upper() if name.upper().startswith("SIG") else "SIG" + name.upper()
    signum = int(name) if name.isdigit() else int(getattr(signal, spelled, 0))
    if signum not in set(signal.Signals) or signum == 0:
        raise OptionError(f"--signal: {name!r} is not a signal (a name such as SIGUSR1 or TERM, or a number)")
    if not args:
        raise OptionError("usage: flux job kill [--signal=SIG] JOBID...")
    with _client() as client:
        for text in args:
            client.kill(_jobid(text), signum)
    return 0


def _job_last(argv: list[str]) -> int:
    """flux-core's `flux job last [N|SLICE]`: your most recent job ids, newest first (default the last one)."""
    if len(argv) > 1:
        raise OptionError("usage: flux job last [N|SLICE]")
    text = argv[0] if argv else "[:1]"
    if "[" not in text:
        if not text.lstrip("-").isdigit():
            raise OptionError(f"N: expected a number of jobs or a [start:stop:step] slice, got {text[:40]!r}")
        text = f"[:{int(text)}]"
    with _client() as client:
        try:
            ids = client.last(text)
        except FluxError as exc:
            raise CommandError(str(exc)) from None
    if not ids:
        raise CommandError("job history is empty")
    print("\n".join(encode_f58(j) for j in ids))
    return 0


def _job_urgency(argv: list[str]) -> int:
    if len(argv) != 2:
        raise OptionError("usage: flux job urgency JOBID URGENCY")
    urgency = {"hold": 0, "expedite": 31, "default": 16}.get(argv[1].lower())
    if urgency is None:
        if not argv[1].isdigit() or int(argv[1]) > 31:
            raise OptionError(f"URGENCY: expected 0-31, hold, default or expedite, got {argv[1][:40]!r}")
        urgency = int(argv[1])
    with _client() as client:
        client.set_urgency(_jobid(argv[0]), urgency)
    return 0


JOB_ID_OPTS = [Opt(("-t", "--to"), "to", help="encoding to print: " + "|".join(ENCODINGS) + " (default dec)")]


def _job_id(argv: list[str]) -> int:
    """Convert job ids (arguments, else one per line of stdin) from any spelling to --to's, as flux-core does;
    no id at all fails (exit 1), as there. Needs no instance."""
    if argv[:1] in (["-h"], ["--help"]):
        print(usage("job id [--to=ENCODING] [JOBID...]", "convert job ids to another encoding", JOB_ID_OPTS))
        return 0
    values, args = parse(argv, JOB_ID_OPTS, interleave=True)
    to = str(values.get("to", "dec"))
    if to.lower() not in ENCODINGS:
        raise OptionError(f"Unknown to={to} (--to takes {', '.join(ENCODINGS)})")
    if to.lower() in TABLE_ENCODINGS:
        raise OptionError(f"--to={to}: " + table_encoding_refusal(to.lower()))
    converted = 0
    for text in args if args else (line.strip() for line in sys.stdin):
        try:
            jobid = parse_jobid(text)
        except JobIdError as exc:
            reason = str(exc) if "table" in str(exc) else "malformed input"
            raise CommandError(f"{text}: {reason}") from None
        print(encode_jobid(jobid, to), flush=not args)
        converted += 1
    return 0 if converted else 1


def _job_list(argv: list[str]) -> int:
    with _client() as client:
        for info in client.jobs("all"):
            print(json.dumps(info.to_restful()))
    return 0


# ------------------------------------------------------------------------------------------ cancel
CANCEL_OPTS = [
    Opt(("-m", "--message"), "message", help="note recorded with the cancellation"),
    Opt(("--all",), "all", "flag", help="every active job"),
    Opt(("-q", "--quiet"), "quiet", "flag", help="no summary line"),
]


def _still_active(client: JobClient, jobid: int) -> bool:
    try:
        return client.info(jobid).active
    except _flux_error():
        return True  # unknown: report the cancel's own error


def cmd_cancel(argv: list[str]) -> int:
    values, args = parse(argv, CANCEL_OPTS, interleave=True)
    if args and values.get("all"):
        raise OptionError("Do not specify a list of jobids with --all")
    error = _flux_error()
    with _client() as client:
        ids = [i.id for i in client.jobs("active")] if values.get("all") else [_jobid(a) for a in args]
        if not ids and not values.get("all"):
            raise OptionError("usage: flux cancel [--all] [-m MESSAGE] JOBID...")
        failed = finished = 0
        for jobid in ids:
            try:
                client.cancel(jobid, values.get("message", ""))
            except error as exc:
                if values.get("all") and not _still_active(client, jobid):
                    finished += 1  # it ended between the listing and its cancel: nothing left to cancel
                    continue
                failed += 1
                print(f"flux-cancel: {exc}", file=sys.stderr)
        if values.get("all") and not values.get("quiet"):
            print(f"flux-cancel: Canceled {len(ids) - failed - finished} jobs", file=sys.stderr)
    return 1 if failed else 0


# ------------------------------------------------------------------------------------------ jobs
JOBS_OPTS = [
    Opt(("-a",), "all", "flag", help="all jobs, inactive included"),
    Opt(("-A",), "all_users", "flag", help="all users (the default here: see docs/broker.md)"),
    Opt(("-f", "--filter"), "filter", help="states (pending,running,inactive,...)"),
    Opt(("-o", "--format"), "format", help="Python format string of job fields"),
    Opt(("-n", "--no-header"), "no_header", "flag", help="no header line"),
    Opt(("-c", "--count"), "count", help="at most this many jobs"),
    Opt(("-u", "--user"), "user", help="jobs of this user (a name or uid; 'all': every user's)"),
    Opt(("--json",), "json", "flag", help="JSON records"),
    Opt(("--stats", "--stats-only"), "stats", "flag", unsupported=True),
    Opt(("-q", "--queue"), "queue", unsupported=True),
    Opt(("--recursive", "-R"), "recursive", unsupported=True),
]


def _userid(user: str | None) -> int | None:
    """-u/--user: a user name or uid, None for every user ('all', or no -u)."""
    if not user or user == "all":
        return None
    import pwd

    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        if user.isdigit():
            return int(user)
        raise OptionError(f"--user: no such user {user!r}") from None


def cmd_jobs(argv: list[str]) -> int:
    values, args = parse(argv, JOBS_OPTS, interleave=True)
    states = values.get("filter") or ("all" if values.get("all") else "active")
    from ..jobs.states import parse_states

    try:
        if states != "all":
            parse_states(states)
    except ValueError as exc:
        raise OptionError(f"--filter: {exc}") from None
    userid = _userid(values.get("user"))
    with _client() as client:
        infos = [client.info(_jobid(a)) for a in args] if args else client.jobs(states)
    if userid is not None:
        infos = [info for info in infos if info.userid == userid]
    count = as_int(values, "count", 0) or 0
    if count:
        infos = infos[:count]
    if values.get("json"):
        print(json.dumps({"jobs": [i.to_restful() for i in infos]}))
        return 0
    fmt = values.get("format") or DEFAULT_FORMAT
    for row in format_rows(infos, fmt, not values.get("no_header")):
        print(row)
    return 0
