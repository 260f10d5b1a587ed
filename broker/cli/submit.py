"""Submission options shared by `flux submit/run/bulksubmit/batch/alloc`, turned into a jobspec v1.

Spellings follow flux-core (`-n/-N/-c/-t/-o/-S/--env/--env-remove/--cwd/--job-name/--output/--error/
--urgency/--exclusive/--cc/--bcc`). MPI: `-o mpi=openmpi` runs the program under mpirun with our overlay
launch agent; `flux run`/`submit` set it for you when the program is dynamically linked against libmpi
(`-o mpi=none` turns that off).
"""

from __future__ import annotations

import os

from ..jobs import submit_flags
from ..jobs.build import JobspecError, build_jobspec
from .options import Opt, OptionError, as_int

TYPE_CHECKING = False  # typing's import costs `flux run true` 5 ms: annotations only
if TYPE_CHECKING:
    from typing import Any

    from ..jobs.shapes import FileOutput, Jobspec
    from .option_values import OptionValues

SUBMIT_OPTS = [
    Opt(("-n", "--ntasks"), "ntasks", help="number of tasks"),
    Opt(("-N", "--nodes"), "nodes", help="number of nodes (brokers)"),
    Opt(("-c", "--cores-per-task"), "cores_per_task", help="cores per task"),
    Opt(("-g", "--gpus-per-task"), "gpus_per_task", help="GPUs per task (only 0 here)"),
    Opt(("--tasks-per-node",), "tasks_per_node", help="tasks on each node (with -N)"),
    Opt(("-x", "--exclusive"), "exclusive", "flag", help="whole nodes"),
    Opt(("-t", "--time-limit"), "time_limit", help="time limit: minutes, or FSD (30s, 2h)"),
    Opt(("--urgency",), "urgency", help="0 (hold) .. 31 (expedite), default 16"),
    Opt(("-o", "--setopt"), "setopt", "multi", help="shell option KEY[=VAL] (mpi=openmpi)"),
    Opt(("-S", "--setattr"), "setattr", "multi", help="attribute KEY[=VAL] (system.* by default)"),
    Opt(("--env",), "env", "multi", help="environment rule: -*, NAME, NAME=VAL, -PATTERN"),
    Opt(("--env-remove",), "env_remove", "multi", help="drop variables matching PATTERN"),
    Opt(("--cwd",), "cwd", help="working directory of the tasks"),
    Opt(("--job-name",), "job_name", help="job name"),
    Opt(("--output",), "output", help="copy stdout to FILE ({{id}} = job id)"),
    Opt(("--error",), "error", help="copy stderr to FILE"),
    Opt(("-q", "--queue"), "queue", help="queue name (recorded only)"),
    Opt(("--flags",), "flags", "multi", help="waitable (for flux job wait), debug, novalidate"),
    Opt(("--cc",), "cc", help="submit copies for each id in IDSET ({cc} substituted)"),
    Opt(("--bcc",), "bcc", help="like --cc without substitution"),
    Opt(("--dry-run",), "dry_run", "flag", help="print the jobspec instead of submitting"),
    Opt(("--quiet",), "quiet", "flag", help="do not print job ids"),
    Opt(("--progress",), "progress", "flag", help="count accepted jobs on stderr from the start (a terminal only)"),
    Opt(("-v", "--verbose"), "verbose", "count", help="more messages"),
    Opt(("-l", "--label-io"), "label_io", "flag", help="prefix output lines with the task rank"),
    Opt(("--requeue",), "requeue", "flag", help="requeue (instead of fail) if a broker is lost"),
]
for _name in (
    "--dependency",
    "--begin-time",
    "--input",
    "--bank",
    "--requires",
    "--tasks-per-core",
    "--gpus-per-node",
    "--conf",
    "--add-file",
    "--signal",
    "--taskmap",
    "--env-file",
    "--unbuffered",
    "--jps",
    "--log",
    "--log-stderr",
):
    SUBMIT_OPTS.append(Opt((_name,), _name[2:].replace("-", "_"), unsupported=True))


def apply_env_rules(base: dict[str, str], rules: list[str], removes: list[str]) -> dict[str, str]:
    """Flux's --env rules in order (-* clears, -PAT removes, NAME copies, NAME=VAL sets), then --env-remove."""
    if not rules and not removes:
        return dict(base)
    import fnmatch  # lazily: it loads `re`, which `flux run true` does without

    env = dict(base)
    for rule in rules:
        if rule.startswith("-"):
            pattern = rule[1:]
            env = {k: v for k, v in env.items() if not fnmatch.fnmatchcase(k, pattern)}
        elif "=" in rule:
            name, _, value = rule.partition("=")
            env[name] = os.path.expandvars(value)
        elif rule in os.environ:
            env[rule] = os.environ[rule]
    for pattern in removes:
        env = {k: v for k, v in env.items() if not fnmatch.fnmatchcase(k, pattern)}
    return env


# flux-core turns `-t N<unit>` into a datetime.timedelta, which refuses a billion days or more (99999999999h is
# "Python int too large to convert to C int" there): the same bound here, for every spelling, with its own words.
MAX_TIME_LIMIT_DAYS = 999_999_999


def time_limit(text: str) -> float:
    """flux submit -t: a bare number is minutes; otherwise a Flux Standard Duration."""
    from ..fsd import parse_fsd  # lazily: it loads `re`

    try:
        seconds = float(text) * 60.0 if text.replace(".", "", 1).isdigit() else parse_fsd(text)
    except ValueError as exc:
        raise OptionError(f"--time-limit: {exc}") from None
    if not seconds < float("inf"):  # as flux-core's Jobspec: no limit is 0 (the default), not inf
        raise OptionError(f"--time-limit: {text!r}: must be a normal, finite duration (omit it for no limit)")
    if seconds >= (MAX_TIME_LIMIT_DAYS + 1) * 86400.0:
        raise OptionError(
            f"--time-limit: {text!r} is too long: at most {MAX_TIME_LIMIT_DAYS}d, as flux-core (omit it for no limit)"
        )
    return seconds


def _set_dotted(tree: dict[str, Any], name: str, value: Any, item: str) -> None:  # open: --setattr's tree
    """`malleable.min=2` sets tree["malleable"]["min"], as flux-core's Jobspec.setattr nests dotted names."""
    *parents, leaf = name.split(".")
    if not leaf or not all(parents):
        raise OptionError(f"--setattr: {item!r}: an empty name between dots")
    for part in parents:
        child = tree.setdefault(part, {})
        if not isinstance(child, dict):
            raise OptionError(f"--setattr: {item!r}: {part!r} is already set to a value, not a table of attributes")
        tree = child
    tree[leaf] = value


def _keyval(text: str, flag: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not key.strip():
        raise OptionError(f"{flag}: {text!r}: a name is required (KEY[=VAL])")
    if not sep:
        return key, 1
    import json

    from broker.jsondepth import depth_problem, too_deep  # lazily: it loads `re`

    if too_deep(raw.encode("utf-8", "surrogateescape")):  # json.loads recursed into a RecursionError
        raise OptionError(f"{flag}: {key}: {depth_problem()}")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


def links_mpi(program: str) -> bool:
    """Whether the program (found on PATH) is an ELF file that names libmpi among its libraries."""
    import shutil  # lazily: shutil pulls in the compression modules

    path = program if "/" in program else shutil.which(program)
    if not path:
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
            if head != b"\x7fELF":
                return False
            data = handle.read(64 << 20)
    except OSError:
        return False
    return b"libmpi.so" in data


def submit_flag_bits(values: OptionValues) -> int:
    """--flags as flux-core's submit flag bits; other words are refused, as there."""
    bits = 0
    for flag in (f for item in values.get("flags", []) for f in item.split(",")):
        if flag not in submit_flags.BY_NAME:
            raise OptionError(f"--flags: unknown flag {flag!r} (expected {', '.join(submit_flags.BY_NAME)})")
        bits |= submit_flags.BY_NAME[flag]
    return bits


def build_from_options(values: OptionValues, command: list[str], batch_nodes_default: bool = False) -> Jobspec:
    """The jobspec `flux submit` would build for these options."""
    if not command:
        raise OptionError("a command is required")
    submit_flag_bits(values)
    nodes = as_int(values, "nodes", None, 1)
    per_node = as_int(values, "tasks_per_node", None, 1)
    ntasks = as_int(values, "ntasks", None, 1)
    if per_node is not None:
        if nodes is None:
            raise OptionError("--tasks-per-node requires --nodes")
        ntasks = nodes * per_node
    cores = as_int(values, "cores_per_task", 1, 1) or 1
    if as_int(values, "gpus_per_task", 0):
        raise OptionError("--gpus-per-task: this broker has no GPU support")
    exclusive = bool(values.get("exclusive")) or (batch_nodes_default and nodes is not None and ntasks is None)
    # open (shell, system, user): --setopt and --setattr name any option or attribute, with any JSON value
    shell: dict[str, Any] = dict(_keyval(o, "--setopt") for o in values.get("setopt", []))
    system: dict[str, Any] = {}
    user: dict[str, Any] = {}  # open: as above
    for item in values.get("setattr", []):
        key, value = _keyval(item, "--setattr")
        if key.startswith("user."):
            name, where = key[5:], user
        else:
            name, where = (key[7:] if key.startswith("system.") else key.removeprefix(".")), system
        if not name.strip():  # `user.=x` or `system.=x`: a prefix with no attribute after it
            raise OptionError(f"--setattr: {item!r}: a name is required after {key!r} (KEY[=VAL])")
        _set_dotted(where, name, value, item)
    if values.get("requeue"):
        system["requeue"] = True
    output: dict[str, FileOutput] = {}
    if values.get("output"):
        output["stdout"] = {"type": "file", "path": values["output"]}
    if values.get("error"):
        output["stderr"] = {"type": "file", "path": values["error"]}
    if output:
        shell["output"] = output
    total = ntasks if ntasks is not None else (nodes or 1)
    if "mpi" not in shell and total > 1 and links_mpi(command[0]):
        shell["mpi"] = "openmpi"
    if str(shell.get("mpi", "")).lower() == "none":
        del shell["mpi"]
    environment = apply_env_rules(dict(os.environ), values.get("env", []), values.get("env_remove", []))
    try:
        return build_jobspec(
            command,
            ntasks=total,
            nnodes=nodes,
            cores_per_task=cores,
            exclusive=exclusive,
            duration=time_limit(values["time_limit"]) if values.get("time_limit") else 0.0,
            cwd=values.get("cwd") or os.getcwd(),
            environment=environment,
            name=values.get("job_name", ""),
            queue=values.get("queue", ""),
            shell_options=shell or None,
            system_attributes=system or None,
            user_attributes=user or None,
        )
    except JobspecError as exc:
        raise OptionError(str(exc)) from None


def substitute(jobspec: Jobspec, mapping: dict[str, str]) -> Jobspec:
    """The jobspec with {cc}/{} style placeholders replaced in the command and job name.

    Copies only the path to what changes and shares the rest (the environment is most of a jobspec): `--cc=1-5000`
    built 5,000 deep copies. The same object comes back when nothing changes, so its encoding can be reused.
    """
    task = jobspec["tasks"][0]
    command = [_fill(word, mapping) for word in task["command"]]
    system = jobspec["attributes"]["system"]
    job = system.get("job")
    name = job["name"] if isinstance(job, dict) and "name" in job else None
    new_name = _fill(name, mapping) if name is not None else None
    if command == task["command"] and new_name == name:
        return jobspec
    out = jobspec.copy()
    first = task.copy()
    first["command"] = command
    out["tasks"] = [first, *jobspec["tasks"][1:]]
    if new_name != name:
        attributes = jobspec["attributes"].copy()
        attributes["system"] = dict(system, job=dict(job or {}, name=new_name))  # a dict: it held the name
        out["attributes"] = attributes
    return out


def _fill(text: str, mapping: dict[str, str]) -> str:
    for key, value in mapping.items():
        text = text.replace("{" + key + "}", value)
    return text
