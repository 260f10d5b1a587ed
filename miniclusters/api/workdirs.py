"""Which paths may be a work directory we write and delete in (spec.campaign.workdir, spec.multiplexing.workdir).

Pure, on the path as written: the spec rules report these at `validate`, and the claim on disk
(miniclusters/workdirs.py) checks them again on the path with its symlinks resolved. What is on disk (a directory
full of someone's files, another cluster's marker) is for the claim: `validate` may run far from the directory.
"""

from __future__ import annotations

import posixpath

SYSTEM_TREES: tuple[str, ...] = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys", "/usr",
)  # fmt: skip
"""The machine's own trees: nothing of ours is written anywhere under them. (/run is not one: it is the pods'
run volume, where spec.multiplexing.workdir may point on Kubernetes.)"""


def workdir_problem(value: str) -> str | None:
    """Why `value` cannot be a work directory of ours, or None: it must be absolute, name its directory without
    `.`/`..` components or a NUL, and be neither the root, a top-level directory, nor under a system tree."""
    if "\x00" in value:
        return "contains a NUL character"
    if not value.startswith("/"):
        return f"{value!r} must be an absolute path"
    if any(part in (".", "..") for part in value.split("/")):
        return f"{value!r} has a '.' or '..' component; name the directory itself"
    path = posixpath.normpath(value)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    if path == "/":
        return "'/' is the machine's root; name a directory of its own for the work"
    for tree in SYSTEM_TREES:
        if path == tree or path.startswith(tree + "/"):
            return f"{value!r} is under {tree}, a system directory"
    if path.count("/") == 1:
        return f"{value!r} is a top-level directory of the machine; name a directory of its own inside it"
    return None
