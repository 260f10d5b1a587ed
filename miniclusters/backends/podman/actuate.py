"""The podman actuator: the one writer of a podman cluster's size (its record, then its pods) and of its pods'
CPU (`podman update --cpu-shares` of the running container: the cgroup's weight changes, the processes stay)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from elasticity.control.ports import PodResize, ScaleResult
from miniclusters.backends.base import (
    InvalidRequestError,
    ResizeOutcome,
    ResizeResult,
    requested_millicores,
)
from miniclusters.backends.podman.core import PodmanContext, runner_container
from miniclusters.backends.podman.observe import shares_to_millicores, this_machine
from miniclusters.backends.podman.play import PodPlayer
from miniclusters.backends.policy import check_scale


class PodmanActuator:
    """scale and resize: given the context and the pod player."""

    def __init__(self, ctx: PodmanContext, player: PodPlayer) -> None:
        self._ctx = ctx
        self._player = player

    def scale_to(self, name: str, size: int) -> ScaleResult:
        """Add pods for the new indexes (they join as the ranks the broker config registered) or remove the
        highest ones; the lead (index 0) is never removed."""
        record, mc = self._ctx.load(name)
        registered = record.registered
        check_scale(mc.spec.min_size, registered, size, name)
        previous = mc.spec.size
        present = {p.index for p in self._ctx.pods(name, mc)}
        record = record.with_size(size)
        self._ctx.store.save(record)
        record, mc = self._ctx.load(name)
        rendered = self._ctx.rendered(record, mc)
        gone = sorted(i for i in present if i >= size)
        if gone:
            self._player.remove_pods(rendered, gone)
            kept = {k: v for k, v in record.cpu.items() if int(k) < size}
            record = replace(record, cpu=kept)
            self._ctx.store.save(record)
        new = [i for i in range(size) if i not in present]
        if new:
            self._player.play(record, rendered, new, runner_container(mc), lead_restarts=True)
        return ScaleResult(name, previous, size)

    def resize(self, name: str, index: int, cpu: str) -> ResizeResult:
        """Change pod `index`'s CPU request in place: its container's cpu.shares; never restarts it."""
        answer = self.resize_many(name, {index: requested_millicores(cpu)})[index]
        return ResizeResult.answered(index, f"{name}-{index}", answer, cpu)

    def resize_many(self, name: str, requests: Mapping[int, int]) -> dict[int, PodResize]:
        """One `podman update` per pod; a request above this machine's CPUs is Infeasible (as the kubelet says
        of more than the node's capacity) and changes nothing."""
        record, mc = self._ctx.load(name)
        for index, milli in requests.items():
            self._ctx.require_index(name, mc, index)
            if milli < 0:
                raise InvalidRequestError(f"pod index {index}: negative CPU request {milli}m")
        capacity = this_machine().allocatable_millicores
        answers: dict[int, PodResize] = {}
        for index in sorted(requests):
            milli = requests[index]
            if milli > capacity:
                answers[index] = PodResize(
                    index,
                    ResizeOutcome.INFEASIBLE,
                    f"Node didn't have enough capacity: cpu, requested: {milli}m, capacity: {capacity}m",
                    milli,
                )
                continue
            self._player.set_shares(name, index, runner_container(mc), milli)
            record = replace(record, cpu={**record.cpu, str(index): milli})
            self._ctx.store.save(record)
            answers[index] = PodResize(index, ResizeOutcome.DONE, "cpu.shares updated in place", milli)
        pods = {p.index: p for p in self._ctx.pods(name, mc)}
        out = {}
        for index, answer in answers.items():
            shares = pods[index].cpu_shares if index in pods else None
            actual = shares_to_millicores(shares) if shares else None
            out[index] = PodResize(index, answer.outcome, answer.reason, answer.cpu_requested, actual)
        return out
