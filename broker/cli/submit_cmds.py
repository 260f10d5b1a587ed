"""`flux submit`, `run`, `bulksubmit`, `batch` and `alloc`: options to jobspecs, submitted through the lean client.

`flux run true` is mostly interpreter start-up, so this module and what it imports at start-up stay free of
`json`, `re`, `enum` and `typing` (tests/broker/test_broker_lean_imports.py holds it to that): the job API
(broker/jobs/api.py) is imported only by --wait, which reads each job's end as a JobInfo.
"""

from __future__ import annotations

import itertools
import os
import sys

from ..jobs.jobid import encode_f58
from .jobcli_common import CommandError, _attach, _exit_code, _idset, _redirected
from .lean import connect, wire_json
from .options import Opt, OptionError, as_int, parse
from .submit import SUBMIT_OPTS, build_from_options, submit_flag_bits, substitute

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..jobs.api import RpcHandle

# ------------------------------------------------------------------------------------------ submission
SUBMIT_WINDOW = 256  # submissions in flight: enough to keep the broker busy, few enough to bound both queues


def _submit_many(handle: RpcHandle, jobspecs: list[dict[str, Any]], values: dict[str, Any]) -> list[int]:
    """Pipeline the submissions, SUBMIT_WINDOW ahead of their answers; the ids come back in order."""
    userid = os.getuid()
    urgency = as_int(values, "urgency", 16) or 0
    flags = submit_flag_bits(values)
    if len(jobspecs) == 1:
        payload = {"jobspec": jobspecs[0], "urgency": urgency, "userid": userid, "flags": flags}
        return [int(handle.rpc("job-manager.submit", payload)["id"])]
    send, wait = handle.send_request, handle.wait  # type: ignore[attr-defined]
    send_encoded = getattr(handle, "send_encoded", None)
    encoded: tuple[object, bytes] | None = None  # the last spec and its encoding: --cc without {cc} shares one
    pending: list[int] = []  # tags in flight, oldest first from `first`
    first = 0
    ids: list[int] = []
    for spec in jobspecs:
        if len(pending) - first >= SUBMIT_WINDOW:
            ids.append(int(wait(pending[first])["id"]))
            first += 1
        payload = {"jobspec": spec, "urgency": urgency, "userid": userid, "flags": flags}
        if send_encoded is None:
            pending.append(send("job-manager.submit", payload))
            continue
        if encoded is None or encoded[0] is not spec:
            encoded = (spec, wire_json("job-manager.submit", payload))
        pending.append(send_encoded("job-manager.submit", encoded[1]))
    ids.extend(int(wait(tag)["id"]) for tag in pending[first:])
    return ids


def _wait_all(handle: RpcHandle, ids: list[int]) -> int:
    """--wait: the worst exit code of the jobs, each read as a JobInfo when it ends."""
    from ..jobs.api import JobClient

    client = JobClient(handle=handle)
    return max(_exit_code(client.wait(j)) for j in ids)


def _print_jobspec(jobspec: object) -> None:
    """--dry-run: the jobspec as `json.dumps` prints it (and flux-core's --dry-run, one line)."""
    import json

    print(json.dumps(jobspec))


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
        _print_jobspec(specs[0])
        return 0
    with connect() as handle:
        ids = _submit_many(handle, specs, values)
        if not values.get("quiet"):
            sys.stdout.write("".join(encode_f58(j) + "\n" for j in ids))
            sys.stdout.flush()
        if values.get("watch"):
            return max(_attach(handle, j, bool(values.get("label_io")), _redirected(values)) for j in ids)
        if values.get("wait"):
            return _wait_all(handle, ids)
    return 0


def cmd_run(argv: list[str]) -> int:
    values, command = parse(argv, SUBMIT_OPTS)
    jobspec = build_from_options(values, command)
    if values.get("dry_run"):
        _print_jobspec(jobspec)
        return 0
    with connect() as handle:
        (jobid,) = _submit_many(handle, [jobspec], values)
        if values.get("verbose"):
            print(f"jobid: {encode_f58(jobid)}", file=sys.stderr)
        return _attach(handle, jobid, bool(values.get("label_io")), _redirected(values))


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
            _print_jobspec(spec["tasks"][0]["command"])
        return 0
    with connect() as handle:
        ids = _submit_many(handle, specs, values)
        if not values.get("quiet"):
            print("\n".join(encode_f58(j) for j in ids))
        if values.get("wait"):
            return _wait_all(handle, ids)
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
        _print_jobspec(jobspec)
        return 0
    with connect() as handle:
        (jobid,) = _submit_many(handle, [jobspec], values)
        print(encode_f58(jobid))
    return 0


def cmd_alloc(argv: list[str]) -> int:
    values, rest = parse(argv, SUBMIT_OPTS)
    if not rest:
        raise OptionError("flux alloc needs a command (interactive shells are not supported)")
    jobspec = _instance_jobspec(values, rest, None)
    if values.get("dry_run"):
        _print_jobspec(jobspec)
        return 0
    with connect() as handle:
        (jobid,) = _submit_many(handle, [jobspec], values)
        return _attach(handle, jobid, False)
