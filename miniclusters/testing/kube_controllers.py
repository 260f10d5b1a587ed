"""The controllers behind the fake API server: just enough of the Job controller and the kubelet to see pods come,
go, finish and resize (the kubelet admits resizes with elasticity/model/node.py, as the local backend does)."""

from __future__ import annotations

import copy
import itertools
from typing import TYPE_CHECKING, Literal, cast

from elasticity.model.node import Node, PodCpu, Verdict, admit_resize, deferred_message, infeasible_message
from miniclusters.api.quantity import cpu_millicores
from miniclusters.backends.base import RESIZE_IN_PROGRESS, RESIZE_PENDING
from miniclusters.backends.kubernetes.api import JOB, POD, Kind
from miniclusters.backends.kubernetes.status import qos_class
from miniclusters.kube_shapes import (
    AnyObject,
    ContainerStateDetail,
    Job,
    JobStatus,
    KubeObject,
    Pod,
    PodContainer,
)
from miniclusters.render.layout import INDEX_LABEL

KubeletMode = Literal["auto", "accept", "in-progress", "defer", "infeasible"]

NODE_NAME = "node"
"""The fake's single node: the name the scheduler binds each pod it starts to (`spec.nodeName`)."""


class Controllers:
    """Mixed into FakeKube; declares (for type checking) the parts of the fake the controllers use."""

    if TYPE_CHECKING:
        objects: dict[tuple[str, str, str], KubeObject]
        kubelet: KubeletMode
        node_cpu: str
        start_pods: bool
        _uid: itertools.count[int]

        def all_of(self, kind: Kind, namespace: str | None = None) -> list[KubeObject]: ...
        def pods_of(self, job: str, namespace: str | None = None) -> dict[int, Pod]: ...
        @staticmethod
        def _key(kind: Kind) -> str: ...
        def _now(self) -> str: ...
        def _touch(self, obj: AnyObject, event: str) -> None: ...
        def _remove(self, obj: AnyObject) -> None: ...

        pod_logs: dict[str, list[str]]

    # ------------------------------------------------------------------ the kubelet's events (test controls)
    def finish_pod(self, job: str, index: int, exit_code: int = 0, namespace: str | None = None) -> None:
        """The container of pod `index` exits (the kubelet reports it); the Job controller reacts."""
        pod = self.pods_of(job, namespace)[index]
        pod["status"]["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        for status in pod["status"].get("containerStatuses", []):
            status["state"] = {"terminated": self._terminated(pod, status["name"], exit_code)}
            status["ready"] = False
        self._set_condition(pod, "Ready", "False", "PodCompleted")
        self._touch(pod, "MODIFIED")
        self.run_controllers()

    def crash_container(self, job: str, index: int, exit_code: int = 137, namespace: str | None = None) -> None:
        """The container of pod `index` fails and the kubelet restarts it in place (restartPolicy OnFailure):
        restartCount goes up, the last termination moves to lastState, and until the back-off ends the
        container waits with reason CrashLoopBackOff and the pod is not Ready; its phase stays Running.
        https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#container-restarts
        """
        pod = self.pods_of(job, namespace)[index]
        for status in pod["status"].get("containerStatuses", []):
            status["restartCount"] = int(status.get("restartCount", 0)) + 1
            status["lastState"] = {"terminated": self._terminated(pod, status["name"], exit_code)}
            waiting: ContainerStateDetail = {
                "reason": "CrashLoopBackOff",
                "message": "back-off restarting failed container",
            }
            status["state"] = {"waiting": waiting}
            status["ready"] = False
        self._set_condition(pod, "Ready", "False", "ContainersNotReady")
        self._touch(pod, "MODIFIED")

    def _terminated(self, pod: Pod, container: str, exit_code: int) -> ContainerStateDetail:
        """The kubelet's record of an ended container; with terminationMessagePolicy FallbackToLogsOnError, a
        failed one's message is the tail of its log (at most 80 lines and 2048 bytes, the termination message
        file being empty here).
        https://kubernetes.io/docs/tasks/debug/debug-application/determine-reason-pod-failure/"""
        ended: ContainerStateDetail = {"exitCode": exit_code, "reason": "Completed" if not exit_code else "Error"}
        none: PodContainer = {}
        spec: PodContainer = next((c for c in pod["spec"]["containers"] if c["name"] == container), none)
        if exit_code and spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            tail = "\n".join(self.pod_logs.get(pod["metadata"]["name"], [])[-80:])
            if tail:
                ended["message"] = tail.encode()[-2048:].decode(errors="ignore")
        return ended

    # ------------------------------------------------------------------ controllers
    def run_controllers(self) -> None:
        """The Job controller and the kubelet, until nothing changes."""
        for _ in range(20):
            changed = False
            for job in cast("list[Job]", self.all_of(JOB, None)):  # the stored Jobs, as the controller reads them
                changed |= self._job_controller(job)
            for pod in self._pods():
                changed |= self._kubelet(pod)
            if not changed:
                return

    def _pods(self) -> list[Pod]:
        """Every stored pod, as the kubelet reads it."""
        return cast("list[Pod]", self.all_of(POD, None))

    def _job_controller(self, job: Job) -> bool:
        spec, status = job["spec"], job.setdefault("status", {})
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in status.get("conditions", [])):
            return False
        name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
        pods = self.pods_of(name, namespace)
        changed = False
        completions = spec.get("completions", 1)
        wanted = min(spec.get("parallelism", 1), completions)
        # Scaling an elastic Indexed Job down removes the highest indexes (DOCS_JOB_ELASTIC).
        for index, pod in sorted(pods.items()):
            if index >= completions:
                self._remove(pod)
                changed = True
        succeeded = {i for i, p in pods.items() if p["status"].get("phase") == "Succeeded" and i < completions}
        failed = {i for i, p in pods.items() if p["status"].get("phase") == "Failed"}
        active = [i for i, p in pods.items() if p["status"].get("phase") in ("Pending", "Running") and i < completions]
        replaced = 0
        for index in range(completions):
            if len(active) >= wanted:
                break
            if index in pods and index not in failed:
                continue
            if index in failed:
                self._remove(pods[index])  # a failed pod is replaced; the failure stays counted
                replaced += 1
            self._create_pod(job, index)
            active.append(index)
            changed = True
        policy = spec.get("successPolicy")
        success_rules = (policy.get("rules") if policy else None) or []
        done = any(set(map(int, r.get("succeededIndexes", "-1").split(","))) <= succeeded for r in success_rules)
        new_status: JobStatus = {
            **status,
            "active": len(active),
            "ready": sum(1 for i, p in self.pods_of(name, namespace).items() if self._ready(p)),
            "succeeded": len(succeeded),
            "failed": int(status.get("failed", 0)) + replaced,
        }
        if done or (succeeded >= set(range(completions)) and completions):
            new_status["conditions"] = [
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "SuccessPolicy"},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached"},
            ]
            for pod in self.pods_of(name, namespace).values():
                if pod["status"].get("phase") in ("Pending", "Running"):
                    self._remove(pod)
        if new_status != status:
            job["status"] = new_status
            self._touch(job, "MODIFIED")
            changed = True
        return changed

    @staticmethod
    def _ready(pod: Pod) -> bool:
        return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))

    def _create_pod(self, job: Job, index: int) -> None:
        template = copy.deepcopy(job["spec"]["template"])
        name = job["metadata"]["name"]
        meta = template.get("metadata", {})
        pod: Pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{index}-{next(self._uid):05x}",
                "namespace": job["metadata"]["namespace"],
                "labels": {**meta.get("labels", {}), INDEX_LABEL: str(index)},
                "annotations": {**meta.get("annotations", {}), INDEX_LABEL: str(index)},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": name,
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {**template["spec"], "hostname": f"{name}-{index}"},
        }
        for container in pod["spec"]["containers"]:
            env = container.setdefault("env", [])
            env.append({"name": "JOB_COMPLETION_INDEX", "value": str(index)})
        stored = self._insert_raw(pod)
        stored["status"] = {"phase": "Pending", "qosClass": qos_class(stored["spec"]), "conditions": []}

    def _insert_raw(self, obj: Pod) -> Pod:
        meta = obj["metadata"]
        meta["uid"] = f"uid-{next(self._uid):04d}"
        meta["creationTimestamp"] = self._now()
        self.objects[(self._key(POD), meta["namespace"], meta["name"])] = cast(KubeObject, obj)  # stored as any kind
        obj["status"] = {}
        self._touch(obj, "ADDED")
        return obj

    def _set_condition(self, pod: Pod, kind: str, status: str, reason: str = "", message: str = "") -> None:
        conditions = [c for c in pod["status"].get("conditions", []) if c["type"] != kind]
        if status:
            conditions.append({"type": kind, "status": status, "reason": reason, "message": message})
        pod["status"]["conditions"] = conditions

    def _others(self, exclude: str) -> list[PodCpu]:
        """The other active pods on the (single) node, with the CPU the kubelet allocated to them."""
        out = []
        for pod in self._pods():
            if pod["metadata"]["name"] == exclude or pod["status"].get("phase") not in ("Pending", "Running"):
                continue
            allocated = self._own_allocated_milli(pod)
            out.append(PodCpu(pod["metadata"]["name"], allocated, allocated, allocated))
        return out

    @staticmethod
    def _own_allocated_milli(pod: Pod) -> int:
        total = 0
        for status in pod["status"].get("containerStatuses", []):
            cpu = (status.get("allocatedResources") or {}).get("cpu")
            total += cpu_millicores(cpu) if cpu else 0
        return total

    def _kubelet(self, pod: Pod) -> bool:
        status = pod["status"]
        before = copy.deepcopy(status)
        requested = sum(
            cpu_millicores(str(((c.get("resources") or {}).get("requests") or {}).get("cpu") or "0"))
            for c in pod["spec"]["containers"]
        )
        if status.get("phase") == "Pending" and requested > cpu_millicores(self.node_cpu):
            # No node has the CPU it asks for: the scheduler leaves it Pending, unbound (as on the real cluster).
            message = "0/1 nodes are available: 1 Insufficient cpu."
            self._set_condition(pod, "PodScheduled", "False", "Unschedulable", message)
        elif status.get("phase") == "Pending" and self.start_pods:
            pod["spec"]["nodeName"] = NODE_NAME  # bound by the scheduler, as a real pod is before it runs
            status["phase"] = "Running"
            status["containerStatuses"] = [
                {
                    "name": c["name"],
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": self._now()}},
                    "allocatedResources": dict((c.get("resources") or {}).get("requests") or {}),
                    "resources": copy.deepcopy(c.get("resources") or {}),
                }
                for c in pod["spec"]["containers"]
            ]
            self._set_condition(pod, "Ready", "True")
        if status.get("phase") == "Running":
            self._resize(pod)
        if status != before:
            self._touch(pod, "MODIFIED")
            return True
        return False

    def _resize(self, pod: Pod) -> None:
        """Compare desired and allocated CPU; act as the kubelet would (or as the test forces)."""
        statuses = {s["name"]: s for s in pod["status"].get("containerStatuses", [])}
        pending = []
        for container in pod["spec"]["containers"]:
            desired = ((container.get("resources") or {}).get("requests") or {}).get("cpu")
            current = statuses.get(container["name"], {})
            allocated = (current.get("allocatedResources") or {}).get("cpu")
            actual = ((current.get("resources") or {}).get("requests") or {}).get("cpu")
            if desired is None or (allocated and actual and cpu_millicores(desired) == cpu_millicores(actual)):
                continue
            pending.append((container, current, desired))
        if not pending:
            self._set_condition(pod, RESIZE_PENDING, "")
            self._set_condition(pod, RESIZE_IN_PROGRESS, "")
            return
        want = sum(cpu_millicores(d) for _, _, d in pending)
        node = Node(NODE_NAME, cpu_millicores(self.node_cpu))
        admission = admit_resize(node, self._own_allocated_milli(pod), want, self._others(pod["metadata"]["name"]))
        mode: str = self.kubelet
        if mode == "auto":
            # The kubelet admits a resize against the node's allocatable CPU (elasticity/model/node.py):
            # more than the node has is Infeasible, more than is free now is Deferred (DOCS_RESIZE).
            mode = {Verdict.INFEASIBLE: "infeasible", Verdict.DEFERRED: "defer"}.get(admission.verdict, "accept")
        if mode in ("infeasible", "defer"):
            forced = Verdict.INFEASIBLE if mode == "infeasible" else Verdict.DEFERRED
            used = sum(p.committed for p in self._others(pod["metadata"]["name"]))
            message = (
                infeasible_message(want, node.allocatable_millicores)
                if forced == Verdict.INFEASIBLE
                else deferred_message(want, used, node.allocatable_millicores)
            )
            reason = "Infeasible" if forced == Verdict.INFEASIBLE else "Deferred"
            self._set_condition(pod, RESIZE_PENDING, "True", reason, message)
            return
        self._set_condition(pod, RESIZE_PENDING, "")
        for _container, current, desired in pending:
            current.setdefault("allocatedResources", {})["cpu"] = desired
            if mode == "accept":
                current.setdefault("resources", {}).setdefault("requests", {})["cpu"] = desired
        if mode == "in-progress":
            self._set_condition(pod, RESIZE_IN_PROGRESS, "True", "", "kubelet is actuating the resize")
        else:
            self._set_condition(pod, RESIZE_IN_PROGRESS, "")
