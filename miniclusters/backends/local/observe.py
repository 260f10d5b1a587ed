"""What a local MiniCluster looks like now: `status` for people (asks the lead which ranks joined) and the
ClusterView the loops observe (cheap: process liveness, cgroup readings, no broker round trip)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

from broker.refused import EXIT_REFUSED, refusal_reason
from elasticity.control.ports import ClusterView, PodView, ResizeOutcome
from elasticity.model import cpu as cpu_model
from elasticity.model.node import Node
from miniclusters.api.quantity import format_millicores
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import (
    RESIZE_PENDING,
    BackendError,
    ClusterCondition,
    ClusterStatus,
    ClusterSummary,
    PodCondition,
    PodStatus,
)
from miniclusters.backends.local import process, restart
from miniclusters.backends.local.conditions import isolation_condition, queue_condition
from miniclusters.backends.local.core import LEAD_ASK_TIMEOUT, NAMESPACE, LocalContext, deleting_message
from miniclusters.backends.local.state import ClusterRecord, PodRecord
from miniclusters.backends.overlay import overlay_argv, overlay_ranks
from miniclusters.backends.states import cluster_state
from miniclusters.words import plural

NODE_NAME = "localhost"
LOG_TAIL = 16_384
"""Bytes of a pod's log read for a refused broker's reason (it is among its last lines)."""


def this_node() -> Node:
    """This machine as a node: the CPUs this process may run on."""
    return Node(NODE_NAME, len(os.sched_getaffinity(0)) * 1000)


class Observer:
    """status, list, logs and the kernel's view of a pod's CPU (it only reads: the store, processes, cgroups)."""

    def __init__(self, context: LocalContext) -> None:
        self._ctx = context

    def _phase(self, record: ClusterRecord, pod: PodRecord) -> tuple[str, int | None]:
        """(Kubernetes pod phase, exit code once ended)."""
        if process.alive(pod.pid, pod.start_ticks):
            return "Running", None
        code = process.exit_code(self._ctx.store.pod_dir(record.name, pod.index))
        if pod.pid is None:
            return "Pending", code
        return ("Succeeded" if code == 0 else "Failed"), code

    def _pod_status(self, record: ClusterRecord, pod: PodRecord, ranks_up: tuple[int, ...] | None) -> PodStatus:
        phase, code = self._phase(record, pod)
        running = phase == "Running"
        restarted = restart.restart_info(self._ctx.store.pod_dir(record.name, pod.index))
        waiting = restarted.waiting if restarted.waiting == restart.CRASH_LOOP and running else None
        if phase == "Failed":
            waiting = restarted.waiting or "Error"
        ready = running and waiting is None and (ranks_up is None or pod.index in ranks_up)
        allocated = format_millicores(pod.cpu_milli) if pod.cpu_milli else None
        wanted = pod.resize_desired if pod.resize_desired is not None else pod.cpu_milli
        conditions: tuple[PodCondition, ...] = ()
        if pod.resize_outcome:
            reason = pod.resize_outcome.capitalize()  # Deferred / Infeasible, as the kubelet words it
            conditions = (PodCondition(RESIZE_PENDING, "True", reason, pod.resize_message),)
        actual = self.actual_milli(record, pod) if running else None
        return PodStatus(
            index=pod.index,
            name=pod.hostname,
            phase=phase,
            ready=ready,
            cpu_desired=format_millicores(wanted) if wanted else None,
            cpu_allocated=allocated,
            cpu_actual=format_millicores(actual) if actual else None,  # 0: no request, the kernel's minimum
            node=f"{pod.address}" + (f" ({pod.netns})" if pod.netns else ""),
            exit_code=code if not running else None,
            conditions=conditions,
            restarts=restarted.restarts,
            reason=waiting,
            refused=self._refused(record, pod) if phase == "Failed" and code == EXIT_REFUSED else None,
        )

    def _refused(self, record: ClusterRecord, pod: PodRecord) -> str:
        """Why the pod's broker refused to start: its marked line at the end of the pod's log."""
        path = self._ctx.store.pod_dir(record.name, pod.index) / process.LOG_FILE
        try:
            with open(path, "rb") as handle:
                handle.seek(max(0, handle.seek(0, os.SEEK_END) - LOG_TAIL))
                tail = handle.read().decode(errors="replace")
        except OSError:
            tail = ""
        found = refusal_reason(tail)
        return found or f"exit {EXIT_REFUSED}, see `minicluster logs {record.name} {pod.index}`"

    def actual_milli(self, record: ClusterRecord, pod: PodRecord) -> int | None:
        """What the kernel applies now, converted back to a request (cgroup weight, or nice level)."""
        driver = self._ctx.driver(record)
        if driver is not None:
            value = driver.read_weight(record.name, pod.index)
            if value is None:
                return None
            return driver.milli_for(value, pod.cpu_milli)
        nice = process.current_nice(pod.pid)
        if nice is None:
            return None
        return pod.cpu_milli if cpu_model.milli_to_nice(pod.cpu_milli) == nice else cpu_model.nice_to_milli(nice)

    def observe(self, name: str) -> ClusterView:
        """The Observer port: one view from the state file, process liveness and the kernel's CPU knobs (no broker
        round trip, so loops may call it often; `ready` means running here)."""
        record, _ = self._ctx.load(name)
        pods = []
        for _, pod in sorted(record.pods.items()):
            phase, _code = self._phase(record, pod)
            pods.append(
                PodView(
                    index=pod.index,
                    name=pod.hostname,
                    phase=phase,
                    ready=phase == "Running",
                    cpu_request=pod.resize_desired if pod.resize_desired is not None else pod.cpu_milli,
                    cpu_actual=self.actual_milli(record, pod) if phase == "Running" else None,
                    restarts=restart.restart_info(self._ctx.store.pod_dir(record.name, pod.index)).restarts,
                    resize=ResizeOutcome(pod.resize_outcome) if pod.resize_outcome else None,
                    resize_reason=pod.resize_message,
                    node=NODE_NAME,
                )
            )
        return ClusterView(
            name=name,
            size=record.size,
            min_size=record.min_size,
            max_size=record.max_size,
            pods=tuple(pods),
            nodes=(this_node(),),
            observed_at=time.monotonic(),
        )

    def kernel_weight(self, name: str, index: int) -> tuple[str, int | None]:
        """(knob, value) the kernel holds for a pod now: ("cpu.shares", 512), ("cpu.weight", 59) or ("nice", 3)."""
        record, _ = self._ctx.load(name)
        pod = self._ctx.require_pod(record, index)
        driver = self._ctx.driver(record)
        if driver is not None:
            return driver.knob, driver.read_weight(name, index)
        return "nice", process.current_nice(pod.pid)

    def status(self, name: str) -> ClusterStatus:
        record, mc = self._ctx.load(name, deleting_ok=True)
        return self._status_of(record, mc, queue=True)

    def _status_of(self, record: ClusterRecord, _mc: MiniCluster, queue: bool) -> ClusterStatus:
        """What `status` shows (`list` takes its state and ready pods from the same, without the queue)."""
        name = record.name
        lead = record.pods.get(0)
        lead_running = lead is not None and process.alive(lead.pid, lead.start_ticks)
        ranks_up = ranks_down = None
        lead_error = None
        if record.deleting:
            lead_error = deleting_message(name)
        elif lead_running:
            try:
                ranks_up, ranks_down = self._ask_lead(record)
            except BackendError as exc:
                lead_error = str(exc)
        pods = tuple(self._pod_status(record, pod, ranks_up) for _, pod in sorted(record.pods.items()))
        lead_status = pods[0] if pods and pods[0].index == 0 else None
        finished = lead_status is not None and lead_status.phase in ("Succeeded", "Failed")
        succeeded = (lead_status.phase == "Succeeded") if finished and lead_status else None
        if not lead_running and not finished and not record.deleting:
            lead_error = "the lead pod (index 0) is not running"
        conditions = [isolation_condition(record)]
        if record.deleting:
            conditions.append(ClusterCondition("Deleting", "True", "TeardownCutShort", deleting_message(name)))
        if record.latency:
            method = record.latency_method or "netem"
            how = "tc netem qdisc" if method == "netem" else "NFQUEUE delay line, netem being unavailable"
            conditions.append(
                ClusterCondition("NetworkEmulation", "True", method, f"{record.latency} per packet each way ({how})")
            )
        pending = [(p, c) for p in pods for c in p.conditions if c.type == RESIZE_PENDING and c.status == "True"]
        if pending:
            reasons = sorted({c.reason for _, c in pending})
            message = "; ".join(f"pod {p.index} ({p.name}): {c.reason} {c.message}" for p, c in pending)
            conditions.append(ClusterCondition("Resizing", "True", reasons[-1], message))
        failed = [p for p in pods if p.phase == "Failed" and p.index != 0]
        if failed:
            names = ", ".join(f"{p.name} (exit {p.exit_code if p.exit_code is not None else 'killed'})" for p in failed)
            conditions.append(ClusterCondition("Degraded", "True", "PodFailed", names))
        if any(p.reason == restart.BACKOFF_LIMIT_EXCEEDED for p in pods):
            limit = plural(record.backoff_limit, "restart")
            message = f"the Job has reached its backoff limit ({limit}): failed pods stay failed"
            conditions.append(ClusterCondition("Failed", "True", restart.BACKOFF_LIMIT_EXCEEDED, message))
        if queue and lead_running and ranks_up is not None:
            counts = self._queue_summary(record)
            if counts is not None:
                conditions.append(queue_condition(counts))
        return ClusterStatus(
            name=name,
            namespace=NAMESPACE,
            size=record.size,
            max_size=record.max_size,
            min_size=record.min_size,
            pods=pods,
            ranks_up=ranks_up,
            ranks_down=ranks_down,
            conditions=tuple(conditions),
            finished=finished,
            succeeded=succeeded,
            lead_error=lead_error,
            rest_url=f"http://{lead.address}:{_mc.spec.restful.port}" if lead and _mc.spec.restful.enabled else None,
            deleting=record.deleting,
        )

    def _ask_lead(self, record: ClusterRecord) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if not self._ctx.broker_socket(record, 0).exists():
            raise BackendError("the lead broker is starting (its local socket is not open yet)")
        try:
            result = self._ctx.run(record, 0, overlay_argv(record.flavour), LEAD_ASK_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            raise BackendError(f"`flux overlay status` in the lead pod timed out: {exc}") from None
        return overlay_ranks(result)

    def _queue_summary(self, record: ClusterRecord) -> dict[str, int] | None:
        """Job counts by Flux state from the lead (`flux jobs -a`); None while the broker has no job manager."""
        try:
            result = self._ctx.run(record, 0, ["flux", "jobs", "-a", "--no-header", "-o", "{state}"], LEAD_ASK_TIMEOUT)
        except (BackendError, subprocess.TimeoutExpired):
            return None
        if result.rc != 0:
            return None
        counts: dict[str, int] = {}
        for line in result.stdout.split():
            counts[line.strip().upper()] = counts.get(line.strip().upper(), 0) + 1
        return counts

    def logs(self, name: str, index: int = 0, follow: bool = False) -> Iterator[str]:
        record, _ = self._ctx.load(name)
        pod = self._ctx.require_pod(record, index)
        path = self._ctx.store.pod_dir(name, index) / process.LOG_FILE
        pending = ""
        offset = 0
        while True:
            running = process.alive(pod.pid, pod.start_ticks)
            try:
                with open(path, "rb") as handle:
                    handle.seek(offset)
                    chunk = handle.read()
            except FileNotFoundError:
                chunk = b""
            offset += len(chunk)
            pending += chunk.decode(errors="replace")
            *lines, pending = pending.split("\n")
            yield from lines
            if not follow or (not running and not chunk):
                break
            if not chunk:
                time.sleep(0.1)
        if pending:
            yield pending

    def list(self) -> list[ClusterSummary]:
        """Every cluster with the state and ready pods `status` shows for it (the same function decides)."""
        out = []
        for name in self._ctx.store.names():
            try:
                record, mc = self._ctx.load(name, deleting_ok=True)
            except (OSError, ValueError, BackendError):
                continue
            status = self._status_of(record, mc, queue=False)
            out.append(ClusterSummary(name, NAMESPACE, record.size, status.ready_pods, cluster_state(status)))
        return out
