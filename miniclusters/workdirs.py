"""A work directory is ours before we write or delete anything in it (spec.campaign.workdir, the multiplexing
controller's --workdir / spec.multiplexing.workdir).

The rule (docs/campaign.md): the path passes `workdir_problem` as written and with its symlinks resolved, and the
directory either does not exist yet, is empty, or carries our marker (`MARKER`, naming the kind of work, the
cluster and the user) for the same kind, cluster and user. Claiming it writes the marker; anything else is
refused with the field named, before a file is touched. Inside a claimed directory we delete only through
`remove_file` and `remove_tree`, which refuse a path that leads out of it (a symlink planted on the way).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import TypedDict, cast

from common.atomic import write_json
from miniclusters.api.errors import Problem, SpecError
from miniclusters.api.workdirs import workdir_problem

STATE_ENV = "MINICLUSTERS_STATE_DIR"
MARKER = ".minicluster-workdir.json"
"""In every work directory we made: {"kind", "cluster", "uid", "created"}."""


def state_root() -> Path:
    """Where this machine keeps our state, whatever the backend: $MINICLUSTERS_STATE_DIR, else
    $XDG_STATE_HOME/miniclusters, else ~/.local/state/miniclusters (the local backend's clusters live there too)."""
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "miniclusters"


def workdir_for(kind: str, name: str, configured: str) -> Path:
    """A run's work directory: the one the spec names, else `.<kind>/<name>` in our state (no cluster is called
    `.<kind>`: names cannot start with a dot). Not claimed yet: see `claim`."""
    return Path(configured) if configured else state_root() / f".{kind}" / name


def _refuse(field: str, message: str) -> SpecError:
    return SpecError([Problem(field, message)])


class Marker(TypedDict, total=False):
    """The marker's fields; a marker written by hand may lack some (then it is not ours)."""

    kind: str
    cluster: str
    uid: int
    created: str


def read_marker(path: Path) -> Marker | None:
    """The marker of `path` when it has a readable one (a regular file holding a JSON object), else None."""
    marker = path / MARKER
    if marker.is_symlink() or not marker.is_file():
        return None
    try:
        value = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return cast(Marker, value) if isinstance(value, dict) else None


def claim(path: Path, field: str, cluster: str, kind: str, *, ours: bool = False) -> Path:
    """Check that `path` may be the `kind` work directory of `cluster`, create it if needed and mark it ours;
    returns it with its symlinks resolved (what a container mounts). Raises SpecError naming `field`.

    `ours`: the path is one we chose in our own state directory (the default), so an unmarked one that is not
    empty was made by an earlier version of ours and is taken over."""
    problem = workdir_problem(str(path))
    if problem:
        raise _refuse(field, problem)
    real = Path(os.path.realpath(path))
    problem = workdir_problem(str(real)) if real != path else None
    if problem:
        raise _refuse(field, f"{str(path)!r} leads to {str(real)!r}: {problem}")
    if real.exists() or path.is_symlink():
        if not real.is_dir():
            raise _refuse(field, f"{str(path)!r} exists and is not a directory")
        _check_existing(real, field, cluster, kind, ours)
    mine = {"kind": kind, "cluster": cluster, "uid": os.getuid()}
    try:
        real.mkdir(parents=True, exist_ok=True)
        if read_marker(real) is None:
            write_json(real / MARKER, {**mine, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    except OSError as exc:
        raise _refuse(field, f"cannot make {str(path)!r} a work directory: {exc.strerror or exc}") from None
    return real


def _check_existing(real: Path, field: str, cluster: str, kind: str, ours: bool) -> None:
    marker = read_marker(real)
    if marker is not None:
        owner = (marker.get("kind"), marker.get("cluster"), marker.get("uid"))
        if owner != (kind, cluster, os.getuid()):
            raise _refuse(
                field,
                f"{str(real)!r} is the {marker.get('kind')} work directory of MiniCluster {marker.get('cluster')!r} "
                f"(uid {marker.get('uid')}); name another directory",
            )
        return
    try:
        with os.scandir(real) as entries:
            empty = next(entries, None) is None
    except OSError as exc:
        raise _refuse(field, f"cannot read {str(real)!r}: {exc.strerror or exc}") from None
    if not empty and not ours:
        raise _refuse(
            field,
            f"{str(real)!r} is not empty and is not a work directory minicluster made (no {MARKER}); name a new "
            "or empty directory: its files are never overwritten or deleted",
        )


def inside(path: Path, root: Path) -> Path:
    """`path` when it lies in `root` with no symlink on the way below `root`; OSError otherwise."""
    real_root = Path(os.path.realpath(root))
    try:
        relative = path.relative_to(root)
    except ValueError:
        raise OSError(f"{path} is not in the work directory {root}") from None
    if not relative.parts or ".." in relative.parts:
        raise OSError(f"{path} is not a path inside the work directory {root}")
    if Path(os.path.realpath(path)) != real_root / relative:
        raise OSError(f"{path} leads out of the work directory {root} (a symlink on the way); left as it is")
    return path


def remove_tree(path: Path, root: Path) -> None:
    """Remove a folder we wrote inside the work directory `root` (missing is fine)."""
    if os.path.lexists(path):
        shutil.rmtree(inside(path, root))


def remove_file(path: Path, root: Path) -> None:
    """Remove a file we wrote inside the work directory `root` (missing is fine)."""
    if os.path.lexists(path):
        inside(path, root).unlink()
