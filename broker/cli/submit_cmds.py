"""`flux submit`, `run`, `bulksubmit`, `batch` and `alloc`: options to jobspecs, submitted through the lean client.

`flux run true` is mostly interpreter start-up, so this module and what it imports at start-up stay free of
`json`, `re`, `enum` and `typing` (tests/broker/test_broker_lean_imports.py holds it to that): the job API
(broker/jobs/api.py) is imported only by --wait, which reads each job's end as a JobInfo.
"""

from __future__ import annotations

import errno
import itertools
import os
import sys

from ..errors import FluxError
from ..jobs.jobid import encode_f58
from .jobcli_common import CommandError, _attach, _exit_code, _redirected, exit_code
from .lean import connect
from .options import Opt, OptionError, parse
from .submit import SUBMIT_OPTS, build_from_options, substitute
from .submit_stream import Progress, submit_one, submit_stream

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from ..jobs.api import RpcHandle
    from ..jobs.shapes import Jobspec
    from .option_values import OptionValues


# ------------------------------------------------------------------------------------------ submission
def _submit_many(handle: RpcHandle, jobspecs: Iterator[Jobspec], total: int, values: OptionValues) -> list[int]:
    """Stream the submissions (submit_stream.py), printing each id as its answer comes (unless --quiet); the ids
    are kept only for --watch and --wait, which need them after."""
    keep = bool(values.get("watch") or values.get("wait"))
    quiet = bool(values.get("quiet"))
    kept: list[int] = []

    def took(ids: list[int]) -> None:
        if keep:
            kept.extend(ids)
        if not quiet and ids:
            sys.stdout.write("".join(encode_f58(j) + "\n" for j in ids))
            sys.stdout.flush()

    submit_stream(handle, jobspecs, total, values, took, Progress.on_terminal(total, bool(values.get("progress"))))
    return kept


WAIT_ALL_CHUNK = 10_000
"""Job ids per job-manager.wait-all request (a --cc range of 10**6 jobs waits in 100 requests, not one huge one)."""


def _wait_all(handle: RpcHandle, ids: list[int]) -> int:
    """--wait: the worst exit code of the jobs, from one job-manager.wait-all per chunk of ids; a broker without
    it (ENOSYS) is asked job by job, each job's end read as a JobInfo."""
    worst = 0
    for start in range(0, len(ids), WAIT_ALL_CHUNK):
        try:
            answer = handle.rpc("job-manager.wait-all", {"ids": ids[start : start + WAIT_ALL_CHUNK]}, -1, None)
        except FluxError as exc:
            if exc.errnum != errno.ENOSYS:
                raise
            return max(worst, _wait_each(handle, ids[start:]))
        worst = max([worst, *(exit_code(job["returncode"], job["success"]) for job in answer["jobs"])])
    return worst


def _wait_each(handle: RpcHandle, ids: list[int]) -> int:
    from ..jobs.api import JobClient

    client = JobClient(handle=handle)
    return max(_exit_code(client.wait(j)) for j in ids)


def _print_jobspec(jobspec: object) -> None:
    """--dry-run: the jobspec as `json.dumps` prints it (and flux-core's --dry-run, one line)."""
    import json

    print(json.dumps(jobspec))


def _copies(values: OptionValues, jobspec: Jobspec) -> tuple[Iterator[Jobspec], int]:
    """The jobspecs --cc/--bcc ask for, made one at a time as they are sent, and how many: a range of 10**8 ids
    is two numbers here, never a list."""
    for flag, key, text in (("--cc", "cc", values.get("cc")), ("--bcc", "bcc", values.get("bcc"))):
        if text:
            from common import idset  # here: `flux run true` need not load the three modules of `common`

            spans = _spans(flag, text)
            ids = (i for first, last in spans for i in range(first, last + 1))
            copies = (substitute(jobspec, {"cc": str(i)}) for i in ids) if key == "cc" else (jobspec for _ in ids)
            return copies, idset.count(spans)
    return iter([jobspec]), 1


def _spans(flag: str, text: str) -> list[tuple[int, int]]:
    from common import idset

    try:
        return idset.ranges(text)
    except ValueError as exc:
        raise OptionError(f"{flag}: {exc}") from None


def cmd_submit(argv: list[str]) -> int:
    values, command = parse(argv, [*SUBMIT_OPTS, Opt(("--wait",), "wait", "flag"), Opt(("--watch",), "watch", "flag")])
    jobspec = build_from_options(values, command)
    specs, total = _copies(values, jobspec)
    if values.get("dry_run"):
        _print_jobspec(next(specs, jobspec))
        return 0
    with connect() as handle:
        ids = _submit_many(handle, specs, total, values)
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
        jobid = submit_one(handle, jobspec, values)
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
    checked = build_from_options(values, template)  # a bad option is refused before anything is sent
    copies = _copies(values, checked)[1]
    combos = 1
    for group in inputs:
        combos *= len(group)

    def specs() -> Iterator[Jobspec]:
        for seq, combo in enumerate(itertools.product(*inputs)):
            mapping = {str(i): v for i, v in enumerate(combo)}
            mapping["seq"] = str(seq)
            words = [_fill_positional(w, combo, mapping) for w in template]
            yield from _copies(values, build_from_options(values, words))[0]

    if values.get("dry_run"):
        for spec in specs():
            _print_jobspec(spec["tasks"][0]["command"])
        return 0
    with connect() as handle:
        ids = _submit_many(handle, specs(), combos * copies, values)
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


def _instance_jobspec(values: OptionValues, initial: list[str], script: str | None) -> Jobspec:
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
    if not values.get("job_name"):  # as flux-core: the script's name unless --job-name says otherwise
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
        jobid = submit_one(handle, jobspec, values)
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
        jobid = submit_one(handle, jobspec, values)
        return _attach(handle, jobid, False)
