"""The job commands of `flux`: submit, run, bulksubmit, batch, alloc, jobs, job, cancel, queue, proxy.

Kept free of click (see options.py) and of zmq (see lean.py): `flux run true` is mostly interpreter start-up.
Exit codes follow Flux: 0 success, 1 errors, a job's own exit code for run/alloc/attach, 2 bad usage.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from ..jobs.api import JobClient, JobInfo, OutputLine, as_jobid
from ..jobs.jobid import JobIdError, encode_f58
from .options import Opt, OptionError, as_int, parse, usage
from .submit import SUBMIT_OPTS, build_from_options, substitute

EXIT_USAGE = 2


class CommandError(Exception):
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


# ------------------------------------------------------------------------------------------ submission
def _submit_many(client: JobClient, jobspecs: list[dict[str, Any]], urgency: int) -> list[int]:
    """Pipeline the submissions: send them all, then collect the ids (in order)."""
    handle = client.handle
    send = getattr(handle, "send_request", None)
    if send is None or len(jobspecs) == 1:
        return [client.submit(spec, urgency=urgency) for spec in jobspecs]
    tags = [send("job-manager.submit", {"jobspec": s, "urgency": urgency, "userid": os.getuid()}) for s in jobspecs]
    return [int(handle.wait(tag)["id"]) for tag in tags]  # type: ignore[attr-defined]


def _expand_cc(values: dict[str, Any], jobspec: dict[str, Any]) -> list[dict[str, Any]]:
    if values.get("cc"):
        return [substitute(jobspec, {"cc": str(i)}) for i in _idset(values["cc"])]
    if values.get("bcc"):
        return [jobspec for _ in _idset(values["bcc"])]
    return [jobspec]


def cmd_submit(argv: list[str]) -> int:
    values, command = parse(argv, [*SUBMIT_OPTS, Opt(("--wait",), "wait", "flag"), Opt(("--watch",), "watch", "flag")])
    jobspec = build_from_options(values, command)
    specs = _expand_cc(values, jobspec)
    if values.get("dry_run"):
        print(json.dumps(specs[0]))
        return 0
    urgency = as_int(values, "urgency", 16) or 0
    with _client() as client:
        ids = _submit_many(client, specs, urgency)
        if not values.get("quiet"):
            sys.stdout.write("".join(encode_f58(j) + "\n" for j in ids))
            sys.stdout.flush()
        if values.get("watch"):
            return max(_attach(client, j, bool(values.get("label_io")), _redirected(values)) for j in ids)
        if values.get("wait"):
            return max(_exit_code(client.wait(j)) for j in ids)
    return 0


def cmd_run(argv: list[str]) -> int:
    values, command = parse(argv, SUBMIT_OPTS)
    jobspec = build_from_options(values, command)
    if values.get("dry_run"):
        print(json.dumps(jobspec))
        return 0
    with _client() as client:
        jobid = client.submit(jobspec, urgency=as_int(values, "urgency", 16) or 0)
        if values.get("verbose"):
            print(f"jobid: {encode_f58(jobid)}", file=sys.stderr)
        return _attach(client, jobid, bool(values.get("label_io")), _redirected(values))


def cmd_bulksubmit(argv: list[str]) -> int:
    """flux bulksubmit [OPTIONS] COMMAND {} ::: A B ::: C D (one job per combination)."""
    values, rest = parse(argv, [*SUBMIT_OPTS, Opt(("--wait",), "wait", "flag")])
    groups: list[list[str]] = [[]]
    for word in rest:
        if word == ":::":
            groups.append([])
        else:
            groups[-1].append(word)
    template, inputs = groups[0], groups[1:]
    if not template or not inputs or not all(inputs):
        raise OptionError("usage: flux bulksubmit [OPTIONS] COMMAND... ::: ARGS... [::: ARGS...]")
    specs: list[dict[str, Any]] = []
    for seq, combo in enumerate(itertools.product(*inputs)):
        mapping = {str(i): v for i, v in enumerate(combo)}
        mapping["seq"] = str(seq)
        words = [_fill_positional(w, combo, mapping) for w in template]
        base = build_from_options(values, words)
        specs.extend(_expand_cc(values, base))
    if values.get("dry_run"):
        for spec in specs:
            print(json.dumps(spec["tasks"][0]["command"]))
        return 0
    with _client() as client:
        ids = _submit_many(client, specs, as_int(values, "urgency", 16) or 0)
        if not values.get("quiet"):
            print("\n".join(encode_f58(j) for j in ids))
        if values.get("wait"):
            return max(_exit_code(client.wait(j)) for j in ids)
    return 0


def _fill_positional(word: str, combo: tuple[str, ...], mapping: dict[str, str]) -> str:
    if "{}" in word:
        word = word.replace("{}", combo[0])
    for key, value in mapping.items():
        word = word.replace("{" + key + "}", value)
    return word


# ------------------------------------------------------------------------------------------ batch / alloc
BATCH_OPTS = [*SUBMIT_OPTS, Opt(("--wrap",), "wrap", "flag", help="wrap the arguments in a /bin/sh script")]


def _instance_jobspec(values: dict[str, Any], initial: list[str], script: str | None) -> dict[str, Any]:
    if not values.get("nodes") and not values.get("ntasks"):
        values["nodes"] = "1"
    jobspec = build_from_options(values, ["flux", "broker", *initial], batch_nodes_default=True)
    if script is not None:
        jobspec["attributes"]["system"]["batch"] = {"script": script}
    return jobspec


def cmd_batch(argv: list[str]) -> int:
    values, rest = parse(argv, BATCH_OPTS)
    if values.get("wrap"):
        script = "#!/bin/sh\n" + " ".join(rest) + "\n"
    elif not rest or rest[0] == "-":
        script = sys.stdin.read()
    else:
        try:
            with open(rest[0], encoding="utf-8") as handle:
                script = handle.read()
        except OSError as exc:
            raise CommandError(f"{rest[0]}: {exc.strerror}") from None
    if not script.startswith("#!"):
        raise CommandError("batch script must start with '#!' (e.g. #!/bin/sh)")
    args = rest[1:] if rest and not values.get("wrap") else []
    jobspec = _instance_jobspec(values, ["{{tmpdir}}/script", *args], script)
    jobspec["attributes"]["system"].setdefault("job", {})["name"] = (
        os.path.basename(rest[0]) if rest and not values.get("wrap") else "batch"
    )
    if values.get("output") is None:
        shell = jobspec["attributes"]["system"].setdefault("shell", {}).setdefault("options", {})
        shell.setdefault("output", {})["stdout"] = {"type": "file", "path": "flux-{{id}}.out"}
    if values.get("dry_run"):
        print(json.dumps(jobspec))
        return 0
    with _client() as client:
        jobid = client.submit(jobspec, urgency=as_int(values, "urgency", 16) or 0)
        print(encode_f58(jobid))
    return 0


def cmd_alloc(argv: list[str]) -> int:
    values, rest = parse(argv, SUBMIT_OPTS)
    if not rest:
        raise OptionError("flux alloc needs a command (interactive shells are not supported)")
    jobspec = _instance_jobspec(values, rest, None)
    if values.get("dry_run"):
        print(json.dumps(jobspec))
        return 0
    with _client() as client:
        jobid = client.submit(jobspec, urgency=as_int(values, "urgency", 16) or 0)
        return _attach(client, jobid, False)


# ------------------------------------------------------------------------------------------ attach / wait
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


def cmd_job(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("Usage: flux job attach|wait|status|info|eventlog|cancel|kill|urgency|list [ARGS]")
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
    }
    if sub not in handlers:
        raise OptionError(f"flux job {sub}: not supported (try attach, wait, status, info, eventlog, cancel, kill)")
    return handlers[sub](rest)


def _job_attach(argv: list[str]) -> int:
    values, args = parse(argv, [Opt(("-l", "--label-io"), "label", "flag")], interleave=True)
    if len(args) != 1:
        raise OptionError("usage: flux job attach [--label-io] JOBID")
    with _client() as client:
        return _attach(client, _jobid(args[0]), bool(values.get("label")))


def _job_wait(argv: list[str]) -> int:
    values, args = parse(argv, [Opt(("-a", "--all"), "all", "flag"), Opt(("-v", "--verbose"), "v", "flag")], True)
    with _client() as client:
        if values.get("all") or not args:
            ids = [info.id for info in client.jobs("active")]
            if not ids and not values.get("all"):
                raise CommandError("there are no active jobs to wait for")
            failed = 0
            for jobid in ids:
                info = client.wait(jobid)
                if not info.success:
                    failed += 1
                    print(f"flux-job: {info.f58}: {_failure_text(info)}", file=sys.stderr)
                elif values.get("v"):
                    print(f"{info.f58}: job completed successfully", file=sys.stderr)
            return 1 if failed else 0
        info = client.wait(_jobid(args[0]))
        if not info.success:
            print(f"flux-job: {info.f58}: {_failure_text(info)}", file=sys.stderr)
            return 1
        return 0


def _failure_text(info: JobInfo) -> str:
    if info.exception_type:
        return f"{info.exception_type} exception: {info.exception_note}"
    return f"job exited with exit code {info.returncode}"


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
    import signal

    values, args = parse(argv, [Opt(("-s", "--signal"), "signal")], interleave=True)
    name = values.get("signal", "SIGTERM")
    signum = int(name) if name.isdigit() else int(getattr(signal, name if name.startswith("SIG") else "SIG" + name))
    with _client() as client:
        for text in args:
            client.kill(_jobid(text), signum)
    return 0


def _job_urgency(argv: list[str]) -> int:
    if len(argv) != 2:
        raise OptionError("usage: flux job urgency JOBID URGENCY")
    urgency = {"hold": 0, "expedite": 31, "default": 16}.get(argv[1].lower())
    with _client() as client:
        client.set_urgency(_jobid(argv[0]), urgency if urgency is not None else int(argv[1]))
    return 0


def _job_list(argv: list[str]) -> int:
    with _client() as client:
        for info in client.jobs("all"):
            print(json.dumps(info.to_restful()))
    return 0


# ------------------------------------------------------------------------------------------ cancel
def cmd_cancel(argv: list[str]) -> int:
    values, args = parse(
        argv,
        [Opt(("-m", "--message"), "message"), Opt(("--all",), "all", "flag"), Opt(("-q", "--quiet"), "quiet", "flag")],
        interleave=True,
    )
    error = _flux_error()
    with _client() as client:
        ids = [i.id for i in client.jobs("active")] if values.get("all") else [_jobid(a) for a in args]
        if not ids and not values.get("all"):
            raise OptionError("usage: flux cancel [--all] [-m MESSAGE] JOBID...")
        failed = 0
        for jobid in ids:
            try:
                client.cancel(jobid, values.get("message", ""))
            except error as exc:
                failed += 1
                print(f"flux-cancel: {exc}", file=sys.stderr)
        if values.get("all") and not values.get("quiet"):
            print(f"flux-cancel: Canceled {len(ids) - failed} jobs", file=sys.stderr)
    return 1 if failed else 0


# ------------------------------------------------------------------------------------------ jobs
DEFAULT_FORMAT = (
    "{id.f58:>12} {username:<8.8} {name:<10.10} {status_abbrev:>2.2} {ntasks:>6} {nnodes:>6} {runtime!H:>8} "
    "{contextual_info}"
)
_HEADERS = {
    "id": "JOBID",
    "id.f58": "JOBID",
    "id.dec": "JOBID",
    "username": "USER",
    "userid": "UID",
    "name": "NAME",
    "status_abbrev": "ST",
    "state_single": "ST",
    "status": "STATUS",
    "state": "STATE",
    "result": "RESULT",
    "result_abbrev": "RS",
    "returncode": "RC",
    "ntasks": "NTASKS",
    "nnodes": "NNODES",
    "runtime": "TIME",
    "nodelist": "NODELIST",
    "contextual_info": "INFO",
    "urgency": "URG",
    "priority": "PRI",
    "t_submit": "T_SUBMIT",
    "t_run": "T_RUN",
    "t_inactive": "T_INACTIVE",
    "exception.type": "EXCEPTION-TYPE",
    "exception.note": "EXCEPTION-NOTE",
    "duration": "DURATION",
    "queue": "QUEUE",
    "success": "SUCCESS",
}
_STATE_ABBREV = {"NEW": "N", "DEPEND": "D", "PRIORITY": "P", "SCHED": "S", "RUN": "R", "CLEANUP": "C"}
_RESULT_ABBREV = {"COMPLETED": "CD", "FAILED": "F", "CANCELED": "CA", "TIMEOUT": "TO"}


def _contextual_info(info: JobInfo) -> str:
    """flux-core's INFO column (flux.job.info.contextual_info): why a job waits, else where it runs or ran."""
    if info.state == "PRIORITY":
        return "priority-wait"
    if info.state in ("NEW", "DEPEND", "SCHED"):
        return "held" if info.urgency == 0 else "priority-hold" if info.priority == 0 else ""
    return info.nodelist


def _field(info: JobInfo, name: str) -> Any:
    import pwd

    status = info.result if info.state == "INACTIVE" and info.result else info.state
    values: dict[str, Any] = {
        "id": info.f58,
        "id.f58": info.f58,
        "id.dec": info.id,
        "id.hex": f"{info.id:#x}",
        "username": _username(info.userid, pwd),
        "userid": info.userid,
        "name": info.name,
        "state": info.state,
        "state_single": _STATE_ABBREV.get(info.state, "I"),
        "status": status,
        "status_abbrev": _RESULT_ABBREV.get(status, _STATE_ABBREV.get(status, "I")),
        "result": info.result,
        "result_abbrev": _RESULT_ABBREV.get(info.result, ""),
        "returncode": "" if info.returncode is None else info.returncode,
        "ntasks": info.ntasks,
        "nnodes": info.nnodes if info.nnodes else "",
        "runtime": info.runtime,
        "nodelist": info.nodelist,
        "contextual_info": _contextual_info(info),
        "urgency": info.urgency,
        "priority": info.priority,
        "t_submit": info.t_submit,
        "t_run": info.t_run,
        "t_cleanup": info.t_cleanup,
        "t_inactive": info.t_inactive,
        "exception.type": info.exception_type,
        "exception.note": info.exception_note,
        "duration": info.duration,
        "success": info.success,
        "queue": "",
    }
    if name not in values:
        raise OptionError(f"--format: unknown field {name!r}")
    return values[name]


_USERS: dict[int, str] = {}


def _username(uid: int, pwd: Any) -> str:
    if uid not in _USERS:
        try:
            _USERS[uid] = pwd.getpwuid(uid).pw_name
        except KeyError:
            _USERS[uid] = str(uid)
    return _USERS[uid]


def _human(seconds: float) -> str:
    if seconds <= 0:
        return "0s"
    if seconds < 60:
        return f"{seconds:.3f}s" if seconds < 10 else f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def format_rows(infos: list[JobInfo], fmt: str, header: bool) -> list[str]:
    import re

    pattern = re.compile(r"\{([a-z_.0-9]+)(?:!([a-zA-Z]))?(?::([^}]*))?\}")
    rows: list[str] = []

    def render(info: JobInfo | None) -> str:
        def one(match: re.Match[str]) -> str:
            name, conv, spec = match.group(1), match.group(2), (match.group(3) or "").rstrip("h+")
            if info is None:
                text = _HEADERS.get(name, name.upper())
                spec = re.sub(r"[^<>^0-9.]", "", spec)
                return format(text, spec)
            value = _field(info, name)
            if conv in ("H", "F") and isinstance(value, float):
                value = _human(value)
            elif conv == "d" and isinstance(value, float):
                value = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(value)) if value else ""
            try:
                return format(value, spec)
            except ValueError:
                return format(str(value), re.sub(r"[^<>^0-9.]", "", spec))

        return pattern.sub(one, fmt).rstrip()

    if header:
        rows.append(render(None))
    rows.extend(render(info) for info in infos)
    return rows


def cmd_jobs(argv: list[str]) -> int:
    opts = [
        Opt(("-a",), "all", "flag", help="all jobs, inactive included"),
        Opt(("-A",), "all_users", "flag", help="all users"),
        Opt(("-f", "--filter"), "filter", help="states (pending,running,inactive,...)"),
        Opt(("-o", "--format"), "format", help="Python format string of job fields"),
        Opt(("-n", "--no-header"), "no_header", "flag"),
        Opt(("-c", "--count"), "count"),
        Opt(("-u", "--user"), "user"),
        Opt(("--json",), "json", "flag"),
        Opt(("--stats", "--stats-only"), "stats", "flag", unsupported=True),
        Opt(("-q", "--queue"), "queue", unsupported=True),
        Opt(("--recursive", "-R"), "recursive", unsupported=True),
    ]
    values, args = parse(argv, opts, interleave=True)
    states = values.get("filter") or ("all" if values.get("all") else "active")
    from ..jobs.states import parse_states

    try:
        if states != "all":
            parse_states(states)
    except ValueError as exc:
        raise OptionError(f"--filter: {exc}") from None
    with _client() as client:
        infos = [client.info(_jobid(a)) for a in args] if args else client.jobs(states)
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


# ------------------------------------------------------------------------------------------ queue
def cmd_queue(argv: list[str]) -> int:
    opts = [
        Opt(("-v", "--verbose"), "verbose", "flag"),
        Opt(("-m", "--message"), "message"),
        Opt(("-t", "--timeout"), "timeout"),
        Opt(("-q", "--quiet"), "quiet", "flag"),
        Opt(("-a", "--all"), "all", "flag"),
    ]
    values, args = parse(argv, opts, interleave=True)
    if not args:
        raise OptionError("usage: flux queue status|start|stop|enable|disable|idle|drain|policy [fcfs|easy]")
    action = args[0]
    with _client() as client:
        if action in ("idle", "drain"):
            from ..fsd import parse_fsd

            timeout = parse_fsd(values["timeout"]) if values.get("timeout") else None
            try:
                client.queue_idle(action, timeout=timeout)
            except _flux_error() as exc:
                raise CommandError(f"{action}: {exc}") from None
            return 0
        if action == "policy":
            status = client.queue("policy", args[1]) if len(args) > 1 else client.queue("status")
            print(status["policy"])
            return 0
        if action not in ("status", "start", "stop", "enable", "disable"):
            raise OptionError(f"flux queue {action}: not supported")
        status = client.queue(action, values.get("message", ""))
    if action in ("status", "start", "stop") and not values.get("quiet"):
        enabled = "enabled" if status["enabled"] else f"disabled: {status['enable_reason']}"
        started = (
            "started" if status["started"] else "stopped" + (f": {status['stop_reason']}" * bool(status["stop_reason"]))
        )
        print(f"Job submission is {enabled}")
        print(f"Scheduling is {started}")
        if values.get("verbose"):
            print(f"Policy {status['policy']}, {status['pending']} pending, {status['running']} running")
    return 0


# ------------------------------------------------------------------------------------------ proxy
def cmd_proxy(argv: list[str]) -> int:
    if not argv:
        raise OptionError("usage: flux proxy JOBID|URI [COMMAND...]")
    target, command = argv[0], argv[1:] or [os.environ.get("SHELL", "/bin/sh")]
    if "://" in target:
        uri = target
    else:
        jobid = _jobid(target)
        with _client() as client:
            info = client.info(jobid)
            sub = info.annotations.get("subinstance")
            if not sub:
                if info.state in ("RUN", "SCHED", "PRIORITY", "DEPEND"):
                    reply = client.handle.rpc(
                        "job-manager.annotation-wait", {"id": jobid, "key": "subinstance"}, -1, 60.0
                    )
                    sub = reply["annotations"].get("subinstance")
                if not sub:
                    raise CommandError(f"{info.f58}: job is not a Flux instance (or has ended)")
            uri = str(sub["uri"])
        deadline = time.monotonic() + 30.0  # the child's rank 0 publishes its URI just before it binds
        while not os.path.exists(uri.removeprefix("local://")) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not os.path.exists(uri.removeprefix("local://")):
            raise CommandError(f"{target}: cannot reach the sub-instance at {uri} from {os.uname().nodename}")
    env = dict(os.environ, FLUX_URI=uri)
    bindir = os.path.dirname(sys.executable)  # so `flux proxy ID flux ...` finds this flux
    env["PATH"] = os.pathsep.join(filter(None, [env.get("PATH", ""), bindir]))
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        raise CommandError(f"{command[0]}: {exc.strerror}") from None
    return 127


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "submit": cmd_submit,
    "run": cmd_run,
    "bulksubmit": cmd_bulksubmit,
    "batch": cmd_batch,
    "alloc": cmd_alloc,
    "jobs": cmd_jobs,
    "job": cmd_job,
    "cancel": cmd_cancel,
    "queue": cmd_queue,
    "proxy": cmd_proxy,
}
SUMMARIES = {
    "submit": "submit a job; print its id",
    "run": "submit a job and wait for it, relaying its output",
    "bulksubmit": "submit one job per combination of inputs (COMMAND ::: ARGS)",
    "batch": "submit a batch script run in a sub-instance",
    "alloc": "run a command in a new sub-instance and wait for it",
}


def main(name: str, argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        opts = BATCH_OPTS if name == "batch" else SUBMIT_OPTS
        print(usage(f"{name} [OPTIONS] ...", SUMMARIES.get(name, ""), opts))
        return 0
    error = _flux_error()
    try:
        return COMMANDS[name](argv)
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
