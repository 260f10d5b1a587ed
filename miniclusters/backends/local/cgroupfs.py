"""Give a pod its CPU cgroup filesystem back after `ip netns exec`, as a container has one.

`ip netns exec` remounts /sys for the pod's network namespace, which hides /sys/fs/cgroup; a Kubernetes container
sees its cgroups there, and the broker reads them (its CPU limit, and `resource.cpu`: the pod's request and CPU
time for the lead's /cluster page). Inside the pod's mount namespace (private to it: the host's mounts are not
touched) the cpu and cpuacct hierarchies, or the cgroup2 mount, are mounted again where the host has them. A
failed mount only leaves the pod as it was before, so it never stops a pod from starting.
"""

from __future__ import annotations

import shlex
from pathlib import Path

CGROUP_ROOT = "/sys/fs/cgroup"
_CONTROLLERS = ("cpu", "cpuacct")


def cgroup_mounts(mounts_text: str) -> list[tuple[str, str, str]]:
    """(type, mount point, controller options) of the hierarchies a pod needs, from /proc/self/mounts (pure)."""
    found = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 4 or not fields[1].startswith(CGROUP_ROOT):
            continue
        kind, point, options = fields[2], fields[1], fields[3].split(",")
        if kind == "cgroup2":
            found.append((kind, point, ""))
        elif kind == "cgroup":
            controllers = [o for o in options if o in _CONTROLLERS]
            if controllers:
                found.append((kind, point, ",".join(controllers)))
    return found


def remount_script(mounts_text: str) -> str | None:
    """A shell snippet that mounts them again (then runs "$@"), or None when there is nothing to mount."""
    mounts = cgroup_mounts(mounts_text)
    if not mounts:
        return None
    steps = []
    if all(point != CGROUP_ROOT for _, point, _ in mounts):  # v1 or hybrid: hierarchies below a tmpfs
        steps.append(f"mount -t tmpfs -o mode=755 cgroup {CGROUP_ROOT}")
    for kind, point, controllers in mounts:
        options = f" -o {controllers}" if controllers else ""
        steps.append(f"mkdir -p {shlex.quote(point)} && mount -t {kind}{options} {kind} {shlex.quote(point)}")
    return "{ " + " && ".join(steps) + '; } 2>/dev/null; exec "$@"'


def host_mounts() -> str:
    try:
        return Path("/proc/self/mounts").read_text()
    except OSError:
        return ""
