"""What `up` says about a MiniCluster that already exists: how to reach it, and how its spec differs.

Pure: the CLI passes in the stored and the new MiniCluster (as Kubernetes objects) and the status it read.
"""

from __future__ import annotations

from typing import Any

from miniclusters.backends.base import ClusterStatus
from miniclusters.kube_shapes import Manifest
from miniclusters.words import of


# open: a spec's leaves, whatever the user wrote there
def _flatten(value: Any, path: str) -> dict[str, Any]:
    """field path -> leaf value of a spec (an empty map is a leaf)."""
    if not (isinstance(value, dict) and value):
        return {path: value}
    out = {}
    for key, item in value.items():
        out.update(_flatten(item, f"{path}.{key}" if path else str(key)))
    return out


def spec_differences(stored: Manifest, wanted: Manifest, limit: int = 5) -> list[str]:
    """Field paths (spec.size: 2 -> 4) where the new spec differs from the one the cluster runs."""
    old = _flatten(stored.get("spec", {}), "spec")
    new = _flatten(wanted.get("spec", {}), "spec")
    changed = [
        f"{path}: {old.get(path, '(unset)')!r} -> {new.get(path, '(unset)')!r}"
        for path in sorted(set(old) | set(new))
        if old.get(path) != new.get(path)
    ]
    if len(changed) > limit:
        changed = [*changed[:limit], f"... and {len(changed) - limit} more"]
    return changed


def reach_lines(name: str, rest_url: str | None, scope: str = "") -> list[str]:
    """The commands that reach a running cluster (printed by `up --detach` and by `up` on an existing one); `scope`
    is the options that find it again (`--backend kubernetes -n hpc`: reach_scope), written after its name."""
    at = f"{name} {scope}" if scope else name
    commands = [(f"minicluster status {at}", "pods, ranks, queue")]
    commands.append((f"minicluster exec {at} -- flux resource list", "any command in the lead pod (--index I)"))
    if rest_url:
        commands.append((f"minicluster jobs --url {rest_url} -a", "the REST API"))
    commands.append((f"minicluster down {at}", "remove it"))
    width = max(len(command) for command, _ in commands) + 3
    return [f"  {command.ljust(width)}# {why}" for command, why in commands]


def existing_message(
    status: ClusterStatus, stored: Manifest | None, wanted: Manifest, scope: str = ""
) -> tuple[int, list[str]]:
    """(exit code, lines) for `up` of a cluster that exists: 0 when it is the same spec and still running,
    2 when the spec differs (nothing is changed), 1 when it has finished (remove it to run it again). `scope`:
    the options that find it again (reach_lines)."""
    name = status.name
    at = f"{name} {scope}" if scope else name
    differences = spec_differences(stored, wanted) if stored is not None else []
    ready = f"{of(status.ready_pods, status.size, 'pod')} ready"
    if status.finished:
        outcome = "completed" if status.succeeded else "failed"
        lines = [
            f"MiniCluster {name} already exists on this machine and has finished ({outcome}); to run it again:",
            f"  minicluster logs {at}     # the lead's output",
            f"  minicluster down {at} && minicluster up ...",
        ]
        return 1, lines
    if differences:
        lines = [
            f"error: MiniCluster {name} is already up ({ready}) from a different spec; nothing was changed:",
            *(f"  {d}" for d in differences),
            f"change its size with `minicluster scale {at} N`, or remove it first with `minicluster down {at}`;",
            "reach the running one with:",
            *reach_lines(name, status.rest_url, scope),
        ]
        return 2, lines
    lines = [f"MiniCluster {name} is already up ({ready}); nothing to do. Reach it with:"]
    lines += reach_lines(name, status.rest_url, scope)
    if status.rest_url:
        lines.insert(1, f"  REST API: {status.rest_url}")
    return 0, lines
