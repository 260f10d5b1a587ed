"""The local actuator: the one writer of a local MiniCluster's size and of its pods' CPU requests.

A resize is admitted as a kubelet admits one (elasticity/model/node.py): this machine is the node, its CPUs are
the allocatable CPU, and every running pod of every local MiniCluster in this state directory counts with the
request it runs with. A refused resize changes nothing in the kernel, is kept on the pod as its desired request
with the reason (status shows PodResizePending), and a Deferred one is retried whenever a later resize or scale
of the cluster may have freed room.
"""

from __future__ import annotations

from collections.abc import Mapping

from elasticity.control.ports import PodResize, ScaleResult
from elasticity.model import cpu as cpu_model
from elasticity.model.node import PodCpu, admit_resize
from miniclusters.backends.base import InvalidRequestError, ResizeOutcome, ResizeResult, requested_millicores
from miniclusters.backends.local import cgroups, process
from miniclusters.backends.local.core import LocalContext
from miniclusters.backends.local.observe import Observer, this_node
from miniclusters.backends.local.pods import Pods
from miniclusters.backends.local.state import ClusterRecord, PodRecord
from miniclusters.backends.policy import check_scale, removed_indexes, spec_size_patch


class Actuator:
    """scale and resize: the Actuator port (scale_to, resize_many) and the Backend's resize of one pod."""

    def __init__(self, context: LocalContext, pods: Pods, observer: Observer) -> None:
        self._ctx = context
        self._pods = pods
        self._observer = observer

    # ------------------------------------------------------------------ scale
    def scale_to(self, name: str, size: int) -> ScaleResult:
        """The Actuator's scale. The ceiling is the hosts registered at creation (record.max_size)."""
        with self._ctx.store.lock():
            record, _mc = self._ctx.load(name)
            check_scale(record.min_size, record.max_size, size, name)
            current = record.size
            if size > current:
                try:
                    for index in range(current, size):
                        self._pods.start(record, index)
                        record.size = index + 1
                        self._ctx.store.save(record)
                except BaseException:
                    self._ctx.store.save(record)
                    raise
            else:
                for index in sorted(removed_indexes(current, size), reverse=True):
                    self._pods.remove(record, index)
                    record.size = index
                    self._ctx.store.save(record)
            record.size = size
            self._ctx.store.save(record)
            spec = self._ctx.store.load_spec(name)
            spec["spec"].update(spec_size_patch(spec["spec"], size, record.max_size))
            self._ctx.store.save_spec(name, spec)
            if size < current:
                self._retry_deferred(record)
        return ScaleResult(name, current, size)

    # ------------------------------------------------------------------ resize
    def resize(self, name: str, index: int, cpu: str) -> ResizeResult:
        """One pod's resize, as the CLI asks it (a quantity string); see resize_many."""
        answer = self.resize_many(name, {index: requested_millicores(cpu)})[index]
        record, _ = self._ctx.load(name)
        return ResizeResult.answered(index, record.pods[index].hostname, answer, cpu)

    def resize_many(self, name: str, requests: Mapping[int, int]) -> dict[int, PodResize]:
        """Rewrite the pods' kernel CPU weights in place (cgroup or nice), each admitted against this node first;
        the pods keep running with the same pids."""
        with self._ctx.store.lock():
            record, _ = self._ctx.load(name)
            for index, milli in requests.items():
                pod = self._ctx.require_pod(record, index)
                if milli < 0:
                    raise InvalidRequestError(f"pod {pod.hostname}: negative CPU request {milli}m")
                if not process.alive(pod.pid, pod.start_ticks):
                    raise InvalidRequestError(
                        f"pod {pod.hostname} (index {index}) is not running; a resize needs a running pod"
                    )
            answers = {index: self._admit_and_apply(record, index, requests[index]) for index in sorted(requests)}
            self._ctx.store.save(record)
            self._retry_deferred(record, skip=set(requests))
            return answers

    def _node_pods(self, record: ClusterRecord, exclude: int) -> list[PodCpu]:
        """Every running pod on this machine but one, with the CPU it runs with (this cluster from `record`)."""
        out = []
        records = [record] + [self._ctx.store.load(n) for n in self._ctx.store.names() if n != record.name]
        for rec in records:
            for pod in rec.pods.values():
                if (rec.name, pod.index) == (record.name, exclude) or not process.alive(pod.pid, pod.start_ticks):
                    continue
                out.append(PodCpu(pod.hostname, pod.cpu_milli, pod.cpu_milli, pod.cpu_milli))
        return out

    def _admit_and_apply(self, record: ClusterRecord, index: int, milli: int) -> PodResize:
        pod = record.pods[index]
        admission = admit_resize(this_node(), pod.cpu_milli, milli, self._node_pods(record, index))
        if not admission.accepted:
            pod.resize_desired, pod.resize_outcome, pod.resize_message = (
                milli,
                admission.verdict.value,
                admission.message,
            )
            outcome = ResizeOutcome(admission.verdict.value)
            return PodResize(index, outcome, admission.message, milli, pod.cpu_milli)
        return self._apply(record, pod, milli)

    def _apply(self, record: ClusterRecord, pod: PodRecord, milli: int) -> PodResize:
        """Write the kernel's knob for an admitted request; what the kernel refuses is Infeasible."""
        index = pod.index
        driver = self._ctx.driver(record)
        if driver is not None:
            before = driver.read_weight(record.name, index)
            try:
                value = driver.set_weight(record.name, index, milli)
            except cgroups.CgroupError as exc:
                return PodResize(index, ResizeOutcome.INFEASIBLE, str(exc), milli, pod.cpu_milli)
            message = f"{driver.knob} {before} -> {value} in place (pid {pod.pid} not restarted)"
        else:
            nice = cpu_model.milli_to_nice(milli)
            errors = process.renice(self._ctx.tag(record, index), nice)
            if errors:
                why = f"cannot set nice {nice} (raising priority needs root): {errors[0]}"
                return PodResize(index, ResizeOutcome.INFEASIBLE, why, milli, self._observer.actual_milli(record, pod))
            message = f"nice level {nice} in place (pid {pod.pid} not restarted)"
        pod.cpu_milli = milli
        pod.resize_desired, pod.resize_outcome, pod.resize_message = None, "", ""
        return PodResize(index, ResizeOutcome.DONE, message, milli, self._observer.actual_milli(record, pod))

    def _retry_deferred(self, record: ClusterRecord, skip: set[int] | None = None) -> None:
        """Admit again the Deferred resizes of this cluster (the kubelet retries them when room may have freed)."""
        waiting = [
            p.index
            for p in record.pods.values()
            if p.resize_outcome == ResizeOutcome.DEFERRED.value
            and p.resize_desired is not None
            and p.index not in (skip or set())
            and process.alive(p.pid, p.start_ticks)
        ]
        for index in sorted(waiting):
            desired = record.pods[index].resize_desired
            assert desired is not None
            self._admit_and_apply(record, index, desired)
        if waiting:
            self._ctx.store.save(record)
