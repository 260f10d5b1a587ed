"""How the fake API server answers an exec into a pod when a test gives it no handler of its own: the built-in
broker's `flux overlay status --json`, `hostname`, and env's words for anything else."""

from __future__ import annotations

import json
from typing import Protocol

from miniclusters.backends.base import ExecResult
from miniclusters.backends.kubernetes.api import ApiError
from miniclusters.kube_shapes import Pod, PodObjectStatus


class PodsOfJobs(Protocol):
    """The fake's pods by Job index (FakeKube.pods_of)."""

    def pods_of(self, job: str, namespace: str | None = None) -> dict[int, Pod]: ...


def check_exec(pod: str, status: PodObjectStatus) -> None:
    """ApiError unless the pod runs: one may exec only into a running pod's container (the real server's words)."""
    phase = status.get("phase")
    if phase == "Pending":
        # the fake's kubelet starts a pod as it binds it: a Pending pod is unbound
        raise ApiError(400, "BadRequest", f"pod {pod} does not have a host assigned")
    if phase != "Running":
        raise ApiError(400, "BadRequest", f"cannot exec into a container in a completed pod; current phase is {phase}")


def default_exec(fake: PodsOfJobs, pod: Pod, argv: list[str]) -> ExecResult:
    """`flux overlay status --json` as our built-in broker answers it: one rank per pre-registered host, up when
    the pod of that index runs; `hostname` answers the pod's hostname; anything else is not found."""
    if argv[:2] == ["sh", "-c"] and len(argv) > 4:  # `sh -c SCRIPT RUNDIR ARGV...`: ARGV at the lead's socket
        argv = argv[4:]
    words = _command_of(argv)
    if words[:2] == ["sh", "-c"] and len(words) > 4:  # `env ... sh -c 'export PATH=...; exec "$@"' sh flux ...`
        words = words[4:]
    if words and words[0].endswith("flux") and words[1:3] == ["overlay", "status"]:
        env = {e["name"]: e.get("value") for c in pod["spec"]["containers"] for e in c.get("env", [])}
        job = pod["metadata"]["labels"]["job-name"]
        max_size = int(env.get("MINICLUSTER_MAX_SIZE") or 1)
        running = {
            i for i, p in fake.pods_of(job, pod["metadata"]["namespace"]).items() if p["status"]["phase"] == "Running"
        }
        ranks = [
            {"rank": r, "hostname": f"{job}-{r}", "state": "up" if r in running else "down", "status": "full"}
            for r in range(max_size)
        ]
        parents = [-1] + [0] * (max_size - 1)
        return ExecResult(0, json.dumps({"size": max_size, "parents": parents, "ranks": ranks, "state": "run"}), "")
    if words == ["hostname"]:
        return ExecResult(0, pod["spec"].get("hostname", pod["metadata"]["name"]) + "\n", "")
    # RealKubeApi runs ARGV under `env` (exec_session.py): an unknown command is env's 127 in env's words
    return ExecResult(127, "", f"env: '{words[0] if words else ''}': No such file or directory\n")


def _command_of(argv: list[str]) -> list[str]:
    """The command `env` would run: `env` words and the NAME=VALUE assignments before the command dropped (the
    real exec runs it all under env, so the pod's `flux` sees those variables)."""
    words = list(argv)
    while words and (words[0] == "env" or ("=" in words[0] and words[0].split("=", 1)[0].isidentifier())):
        words.pop(0)
    return words
