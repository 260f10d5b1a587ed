"""Thin shells around OpenFOAM: its environment, running its tools, and its ASCII file formats.

OpenFOAM's tools refuse to start without their environment (WM_PROJECT_DIR and friends, set by
etc/bashrc). Debian's bashrc only sets WM_* variables, but other installations also change PATH
and LD_LIBRARY_PATH, so the environment is captured once by sourcing the bashrc in bash, and the
variables it sets are applied to every tool run and forwarded to MPI ranks (`mpirun -x`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from elasticity.errors import ElasticityError

DEFAULT_BASHRC = Path("/usr/share/openfoam/etc/bashrc")
#: Override the bashrc location without code changes (e.g. a Docker image with /opt/openfoam).
BASHRC_VARIABLE = "MC_OPENFOAM_BASHRC"
LOG_TAIL_LINES = 25

_FOAM_HEADER = """\
/*--------------------------------*- C++ -*----------------------------------*\\
  written by miniclusters (elasticity.workloads)
\\*---------------------------------------------------------------------------*/
FoamFile
{{
    version     2.0;
    format      ascii;
    class       {cls};
    location    "{location}";
    object      {obj};
}}
// * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * //

"""


class FoamError(ElasticityError, RuntimeError):
    """OpenFOAM is missing or one of its tools failed; the message names the tool and shows its log."""


def default_bashrc() -> Path:
    """$MC_OPENFOAM_BASHRC, else Debian's /usr/share/openfoam/etc/bashrc."""
    return Path(os.environ.get(BASHRC_VARIABLE) or DEFAULT_BASHRC)


@lru_cache(maxsize=8)
def _bashrc_variables(bashrc: str) -> tuple[tuple[str, str], ...]:
    """The variables that sourcing `bashrc` sets or changes, relative to a clean `env -i` shell.

    Sourced in a clean environment so that a shell which already has OpenFOAM loaded does not
    hide the variables; PATH is seeded so the bashrc's own helpers (dirname, ...) are found.
    """
    seed = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root")}
    script = (
        # `set --`: the bashrc passes "$@" on to its setup, which must not see the file name.
        'f="$1"; set --; env -0; printf "\\0--MC-SPLIT--\\0"; source "$f" >/dev/null 2>&1; env -0'
    )
    try:
        proc = subprocess.run(
            ["bash", "-c", script, "bash", bashrc], env=seed, capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FoamError(f"sourcing the OpenFOAM environment {bashrc} failed: {exc}") from exc
    before_raw, _, after_raw = proc.stdout.partition(b"\0--MC-SPLIT--\0")

    def parse(raw: bytes) -> dict[str, str]:
        pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0") if b"=" in item)
        return {k: v for k, _, v in pairs}

    before, after = parse(before_raw), parse(after_raw)
    changed = {k: v for k, v in after.items() if before.get(k) != v and k not in ("_", "SHLVL", "PWD", "OLDPWD")}
    if "WM_PROJECT_DIR" not in changed:
        raise FoamError(
            f"sourcing {bashrc} did not set WM_PROJECT_DIR; is it an OpenFOAM etc/bashrc? "
            f"(set {BASHRC_VARIABLE} to the right file)"
        )
    return tuple(sorted(changed.items()))


def foam_variables(bashrc: Path | str | None = None) -> dict[str, str]:
    """The OpenFOAM environment variables (set or changed by its bashrc), cached per bashrc path."""
    path = Path(bashrc) if bashrc is not None else default_bashrc()
    if not path.is_file():
        raise FoamError(
            f"OpenFOAM environment file {path} not found; install OpenFOAM (Debian: apt-get install openfoam "
            f"openfoam-examples) or set {BASHRC_VARIABLE}"
        )
    return dict(_bashrc_variables(str(path)))


def foam_environment(base: Mapping[str, str] | None = None, bashrc: Path | str | None = None) -> dict[str, str]:
    """A copy of `base` (default os.environ) with the OpenFOAM variables applied."""
    env = dict(os.environ if base is None else base)
    env.update(foam_variables(bashrc))
    return env


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a log file (empty if unreadable): what an error message should show."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run_tool(
    case: Path,
    tool: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    log_name: str | None = None,
    timeout: float = 600.0,
) -> Path:
    """Run an OpenFOAM utility on `case` (cwd = case, `-case case`), logging to case/log.<tool>.

    Returns the log path. Raises FoamError naming the tool and quoting the log's tail when the
    tool is missing, times out or exits non-zero (like the tutorials' runApplication).
    """
    run_env = foam_environment(env)
    exe = shutil.which(tool, path=run_env.get("PATH"))
    if exe is None:
        raise FoamError(
            f"OpenFOAM tool {tool!r} not found on PATH; install OpenFOAM (Debian: apt-get install openfoam)"
        )
    log = case / (log_name or f"log.{tool}")
    cmd = [exe, "-case", str(case), *args]
    try:
        with log.open("w") as out:
            proc = subprocess.run(
                cmd, cwd=case, env=run_env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False
            )
    except subprocess.TimeoutExpired as exc:
        raise FoamError(f"{tool} timed out after {timeout:.0f} s on {case}; log {log}:\n{log_tail(log)}") from exc
    except OSError as exc:
        raise FoamError(f"{tool} could not be started: {exc}") from exc
    if proc.returncode != 0:
        raise FoamError(f"{tool} failed (exit {proc.returncode}) on {case}; log {log}:\n{log_tail(log)}")
    return log


# ---------------------------------------------------------------------------------------------
# ASCII dictionaries and lists


def set_entries(path: Path, entries: Mapping[str, str | int | float]) -> None:
    """Set top-level `key value;` entries of an OpenFOAM dictionary file, appending missing ones.

    Only unindented entries are touched, so the FoamFile header and sub-dictionaries stay intact.
    """
    text = path.read_text()
    for key, value in entries.items():
        line = f"{key:<15} {value};"
        pattern = re.compile(rf"^{re.escape(key)}\s[^;]*;", re.MULTILINE)
        text, n = pattern.subn(line.replace("\\", "\\\\"), text, count=1)
        if n == 0:
            text = text.rstrip("\n") + "\n" + line + "\n"
    path.write_text(text)


def get_entry(path: Path, key: str) -> str | None:
    """The value of a top-level `key value;` entry, or None."""
    m = re.search(rf"^{re.escape(key)}\s+([^;]*);", path.read_text(), re.MULTILINE)
    return m.group(1).strip() if m else None


def write_dictionary(path: Path, body: str, obj: str, location: str = "system") -> None:
    """Write an ASCII OpenFOAM dictionary with a standard FoamFile header."""
    path.write_text(_FOAM_HEADER.format(cls="dictionary", location=location, obj=obj) + body.rstrip() + "\n")


def write_label_list(path: Path, labels: Sequence[int] | np.ndarray, obj: str, location: str = "constant") -> None:
    """Write an ASCII labelList (e.g. the cell-to-processor list of the `manual` decomposition)."""
    values = np.asarray(labels, dtype=np.int64)
    body = f"{values.size}\n(\n" + "\n".join(map(str, values.tolist())) + "\n)\n"
    path.write_text(_FOAM_HEADER.format(cls="labelList", location=location, obj=obj) + body)


def _after_header(text: str, path: Path) -> str:
    m = re.search(r"FoamFile\s*\{[^}]*\}", text)
    if m is None:
        raise FoamError(f"{path}: no FoamFile header")
    header = m.group(0)
    if re.search(r"format\s+binary", header):
        raise FoamError(f"{path}: binary format; set writeFormat ascii in system/controlDict")
    return text[m.end() :]


def read_label_list(path: Path) -> np.ndarray:
    """Read an ASCII labelList file (N ( ... )) into an int64 array."""
    text = _after_header(path.read_text(), path)
    m = re.search(r"(\d+)\s*\(([^)]*)\)", text)
    if m is None:
        raise FoamError(f"{path}: no label list found")
    values = np.array(m.group(2).split(), dtype=np.int64)
    if values.size != int(m.group(1)):
        raise FoamError(f"{path}: list says {m.group(1)} entries but has {values.size}")
    return values


def read_internal_vector_field(path: Path) -> np.ndarray:
    """The internalField of an ASCII volVectorField as an (n, 3) array (uniform fields are refused)."""
    text = _after_header(path.read_text(), path)
    m = re.search(r"internalField\s+nonuniform\s+List<vector>\s*(\d+)\s*\(", text)
    if m is None:
        raise FoamError(f"{path}: no nonuniform List<vector> internalField")
    n = int(m.group(1))
    end = text.find("\n)", m.end())
    if end < 0:
        raise FoamError(f"{path}: internalField list is not closed")
    numbers = text[m.end() : end].replace("(", " ").replace(")", " ").split()
    if len(numbers) != 3 * n:
        raise FoamError(f"{path}: internalField says {n} vectors but has {len(numbers)} numbers")
    return np.array(numbers, dtype=float).reshape(n, 3)


def mesh_cell_count(case: Path) -> int:
    """Cells in case/constant/polyMesh, from the owner file's header note (ASCII or binary meshes)."""
    owner = case / "constant" / "polyMesh" / "owner"
    try:
        head = owner.read_bytes()[:4096].decode(errors="replace")
    except OSError as exc:
        raise FoamError(f"{case}: no mesh ({owner} unreadable: {exc.strerror or exc})") from exc
    m = re.search(r"nCells:\s*(\d+)", head)
    if m is None:
        raise FoamError(f"{owner}: header note has no nCells")
    return int(m.group(1))
