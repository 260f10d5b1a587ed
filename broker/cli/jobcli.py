"""The job commands of `flux`: submit, run, bulksubmit, batch, alloc, jobs, job, cancel, queue, proxy.

Kept free of click (see options.py) and of zmq (see lean.py): `flux run true` is mostly interpreter start-up.
Exit codes follow Flux: 0 success, 1 errors, a job's own exit code for run/alloc/attach, 2 bad usage.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections import deque
from collections.abc import Callable
from typing import Any

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
from .jobcli_common import (
    EXIT_USAGE,
    CommandError,
    _attach,
    _client,
    _exit_code,
    _flux_error,
    _idset,
    _jobid,
    _redirected,
)
from .jobs_format import DEFAULT_FORMAT, format_rows
from .options import Opt, OptionError, as_int, parse, usage
from .queue_proxy import QUEUE_OPTS, cmd_proxy, cmd_queue
from .submit import SUBMIT_OPTS, build_from_options, substitute

# ------------------------------------------------------------------------------------------ submission
SUBMIT_WINDOW = 256  # submissions in flight: enough to keep the broker busy, few enough to bound both queues


def _submit_many(client: JobClient, jobspecs: list[dict[str, Any]], urgency: int) -> list[int]:
    """Pipeline the submissions, SUBMIT_WINDOW ahead of their answers; the ids come back in order."""
    handle = client.handle
    send = getattr(handle, "send_request", None)
    if send is None or len(jobspecs) == 1:
        return [client.submit(spec, urgency=urgency) for spec in jobspecs]
    userid = os.getuid()
    send_encoded = getattr(handle, "send_encoded", None)
    encoded: tuple[object, bytes] | None = None  # the last spec and its encoding: --cc without {cc} shares one
    pending: deque[int] = deque()
    ids: list[int] = []
    for spec in jobspecs:
        if len(pending) >= SUBMIT_WINDOW:
            ids.append(int(handle.wait(pending.popleft())["id"]))  # type: ignore[attr-defined]
        payload = {"jobspec": spec, "urgency": urgency, "userid": userid}
        if send_encoded is None:
            pending.append(send("job-manager.submit", payload))
            continue
        if encoded is None or encoded[0] is not spec:
            encoded = (spec, json.dumps(payload, separators=(",", ":")).encode())
        pending.append(send_encoded("job-manager.submit", encoded[1]))
    ids.extend(int(handle.wait(tag)["id"]) for tag in pending)  # type: ignore[attr-defined]
    return ids


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


def cmd_job(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("Usage: flux job attach|wait|status|info|eventlog|cancel|kill|urgency|list|id [ARGS]")
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
        "id": _job_id,
    }
    if sub not in handlers:
        raise OptionError(f"flux job {sub}: not supported (try attach, wait, status, info, eventlog, cancel, kill, id)")
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
    spelled = name.upper() if name.upper().startswith("SIG") else "SIG" + name.upper()
    signum = int(name) if name.isdigit() else int(getattr(signal, spelled, 0))
    if signum not in set(signal.Signals) or signum == 0:
        raise OptionError(f"--signal: {name!r} is not a signal (a name such as SIGUSR1 or TERM, or a number)")
    with _client() as client:
        for text in args:
            client.kill(_jobid(text), signum)
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
    Opt(("-A",), "all_users", "flag", help="all users"),
    Opt(("-f", "--filter"), "filter", help="states (pending,running,inactive,...)"),
    Opt(("-o", "--format"), "format", help="Python format string of job fields"),
    Opt(("-n", "--no-header"), "no_header", "flag", help="no header line"),
    Opt(("-c", "--count"), "count", help="at most this many jobs"),
    Opt(("-u", "--user"), "user", help="jobs of this user"),
    Opt(("--json",), "json", "flag", help="JSON records"),
    Opt(("--stats", "--stats-only"), "stats", "flag", unsupported=True),
    Opt(("-q", "--queue"), "queue", unsupported=True),
    Opt(("--recursive", "-R"), "recursive", unsupported=True),
]


def cmd_jobs(argv: list[str]) -> int:
    values, args = parse(argv, JOBS_OPTS, interleave=True)
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
    return {"batch": BATCH_OPTS, "jobs": JOBS_OPTS, "cancel": CANCEL_OPTS, "queue": QUEUE_OPTS}.get(
        name, SUBMIT_OPTS if name in ("submit", "run", "bulksubmit", "alloc") else []
    )


def main(name: str, argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(usage(USAGES[name], SUMMARIES[name], help_options(name)))
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
