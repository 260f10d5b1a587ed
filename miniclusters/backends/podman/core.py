"""What every part of the podman backend shares: the podman handle, the store, rendering, playing and removing pods.

Split by concern like the Kubernetes backend: core.py (this), actuate.py (scale and resize), backend.py (create,
status, the Observer port, exec, logs, delete, list).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from broker.curve_cert import parse_zcert
from miniclusters.api import SpecError, load_minicluster
from miniclusters.api.quantity import cpu_millicores, format_millicores
from miniclusters.api.spec import DEFAULT_FLUX_VIEW_IMAGE, MiniCluster
from miniclusters.backends.base import (
    BackendError,
    ClusterStatus,
    InvalidRequestError,
    NotFoundError,
    no_such_pod,
)
from miniclusters.backends.podman.engine import Podman, PodmanError
from miniclusters.backends.podman.observe import PodmanPod, cluster_names, millicores_to_shares, read_pods
from miniclusters.backends.podman.pods import (
    CLUSTER_LABEL,
    Rendered,
    container_name,
    cpu_request,
    network_name,
    orphan_volumes,
    owned_volumes,
    play_documents,
    pod_address,
    pod_name,
    secret_files,
    secret_volume,
)
from miniclusters.backends.podman.restarts import RestartLedger, seen_of
from miniclusters.backends.podman.state import PodmanRecord, PodmanStore
from miniclusters.backends.wait import ProgressCallback
from miniclusters.render import RenderOptions, render_minicluster
from miniclusters.render.layout import NAME_LABEL

PLAY_TIMEOUT = 300.0
"""Seconds one `podman kube play` may take (it returns once the init container has copied the broker in)."""
PULL_FAILURES = ("initializing source", "pinging container registry", "image not known")
STOP_GRACE_S = 1
POD_RM_ATTEMPTS = 3
"""Seconds between SIGTERM and SIGKILL when pods are removed (the entrypoint passes SIGTERM on to its brokers, but
they keep nothing that needs a clean exit, so a longer grace would only delay `down`)."""


def runner_container(mc: MiniCluster) -> str:
    """Name of the container that runs the broker (as the renderer names it)."""
    return mc.spec.containers[mc.spec.flux_runner_index].name or mc.name


VIEW_IMAGE = "miniclusters-flux-view"
"""Our flux view image (images/flux-view): what the `flux` flavour's init container runs here."""


def with_view_image(mc: MiniCluster, registry: str, tag: str) -> MiniCluster:
    """The spec with the default flux view image (the Flux Operator's, which no registry reachable here serves)
    replaced by ours, REGISTRY/miniclusters-flux-view:TAG, built by `make images`; a view the spec names is kept."""
    view = mc.spec.flux.container
    if mc.spec.flux.flavour != "flux" or view.image != DEFAULT_FLUX_VIEW_IMAGE:
        return mc
    container = view.model_copy(update={"image": f"{registry}/{VIEW_IMAGE}:{tag}"})
    flux = mc.spec.flux.model_copy(update={"container": container})
    return mc.model_copy(update={"spec": mc.spec.model_copy(update={"flux": flux})})


class PodmanCore:
    name = "podman"
    ephemeral = True
    """The containers run on this machine: `up` follows the lead, then tears them down unless --keep (and on
    Ctrl-C), as the local backend does."""

    def __init__(
        self,
        progress: ProgressCallback | None = None,
        podman: Podman | None = None,
        store: PodmanStore | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        poll_interval: float = 1.0,
        latency: str | None = None,
        context: str | None = None,
        namespace: str | None = None,
    ) -> None:
        if latency:
            raise InvalidRequestError(f"--latency applies to the local backend only (backend is {self.name!r})")
        if context:
            raise InvalidRequestError(f"--context applies to the kubernetes backend only (backend is {self.name!r})")
        self.podman = podman or Podman()
        self.store = store or PodmanStore()
        self.namespace = namespace or "default"
        self.progress = progress
        self.clock = clock
        self.sleep = sleep
        self.poll_interval = poll_interval

    def status(self, name: str) -> ClusterStatus:
        """Provided by backend.PodmanBackend (declared here so the actuator can call it)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the record and the rendering
    def _load(self, name: str) -> tuple[PodmanRecord, MiniCluster]:
        if not self.store.exists(name):
            hint = ""
            with contextlib.suppress(BackendError):
                if read_pods(self.podman, name, name):
                    hint = (
                        f" (podman has pods labelled {NAME_LABEL}={name} but this state directory does not "
                        f"know them: set MINICLUSTERS_STATE_DIR as when it was created)"
                    )
            raise NotFoundError(f"MiniCluster {name!r} not found on the podman backend{hint}")
        record = self.store.load(name)
        try:
            return record, load_minicluster(record.spec)
        except SpecError as exc:
            raise BackendError(f"the stored spec of MiniCluster {name!r} no longer loads: {exc}") from None

    def _rendered(self, record: PodmanRecord, mc: MiniCluster) -> Rendered:
        """The objects `minicluster render` emits for this cluster now (same keypair, same images)."""
        options = RenderOptions(
            registry=record.registry,
            tag=record.tag,
            namespace=self.namespace,
            certificate=parse_zcert(record.certificate),
        )
        return Rendered.from_objects(render_minicluster(mc, options))

    def _pods(self, name: str, mc: MiniCluster) -> list[PodmanPod]:
        return read_pods(self.podman, name, runner_container(mc))

    def _restarts(self, name: str, pods: list[PodmanPod]) -> dict[int, int]:
        """Each pod's restarts, never fewer than last seen (restarts.py: podman forgets on `podman start`)."""
        seen = {p.index: seen_of(p.container) for p in pods if p.container is not None}
        return RestartLedger(self.store.path(name).parent).update(seen)

    @staticmethod
    def _runner(mc: MiniCluster) -> str:
        return runner_container(mc)

    def runner_identity(self, name: str) -> dict[int, object]:
        """Pod index -> (its application container's PID, start time): what a resize in place leaves alone and a
        recreated pod or restarted container changes (the multiplexing controller's same-PIDs check)."""
        _, mc = self._load(name)
        return {p.index: (p.pid, (p.container or {}).get("State", {}).get("StartedAt")) for p in self._pods(name, mc)}

    def _require_index(self, name: str, mc: MiniCluster, index: int) -> PodmanPod:
        pods = {p.index: p for p in self._pods(name, mc)}
        if index not in pods:
            raise no_such_pod(name, index, pods, mc.spec.size)
        return pods[index]

    def _remove_labelled(self, name: str) -> None:
        """Everything podman holds with our labels for `name` (when its record is gone)."""
        labels = ["--filter", f"label={NAME_LABEL}={name}", "--filter", f"label={CLUSTER_LABEL}=podman"]
        pods = self.podman.run(["pod", "ps", "--format", "{{.Name}}", *labels], "listing pods").stdout.split()
        if pods:
            self._remove_pod_list(pods)
        volumes = self.podman.run(["volume", "ls", "-q", *labels], "listing volumes").stdout.split()
        if volumes:
            self.podman.run(["volume", "rm", "--force", *volumes], f"removing the volumes of {name}")
        every = self.podman.run(["volume", "ls", "--format", "{{.Name}}"], "listing volumes").stdout.split()
        known = {*self.store.names(), *cluster_names(self.podman)}
        for volume in orphan_volumes(name, every, known):  # one at a time, unforced: one still in use stays
            self.podman.run(["volume", "rm", volume], f"removing volume {volume}", check=False)
        self._remove_network(network_name(name))

    # ------------------------------------------------------------------ playing and removing pods
    def _fill_secret(self, rendered: Rendered, index: int) -> None:
        """The pod's Secret volume with the decoded Secret (podman 4.3 would write the base64 text)."""
        volume = secret_volume(rendered, index)
        self.podman.run(
            [
                "volume",
                "create",
                "--label",
                f"{NAME_LABEL}={rendered.name}",
                "--label",
                f"{CLUSTER_LABEL}=podman",
                volume,
            ],
            f"creating volume {volume}",
        )
        mountpoint = self.podman.run(["volume", "inspect", volume, "--format", "{{.Mountpoint}}"], "").stdout.strip()
        for path, (data, mode) in secret_files(rendered).items():
            target = Path(mountpoint) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            os.chmod(target, mode)

    def _play(
        self, record: PodmanRecord, rendered: Rendered, indexes: Iterable[int], runner: str, lead_restarts: bool
    ) -> None:
        """`podman kube play` each pod (all at once); on any failure remove the pods of this call and raise."""
        indexes = sorted(indexes)
        registered = int(record.spec["spec"]["maxSize"])
        started = []
        for index in indexes:
            self._fill_secret(rendered, index)
            documents = play_documents(rendered, index, record.subnet, registered)
            if index == 0 and not lead_restarts:
                documents[-1]["spec"]["restartPolicy"] = "Never"  # the lead's exit is the cluster's result
            path = self.store.path(record.name).parent / f"pod-{index}.yaml"
            path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
            argv = ["kube", "play", "--network", record.network, "--ip", pod_address(record.subnet, index), str(path)]
            started.append((index, self.podman.start(argv)))
        failures = []
        for index, process in started:
            try:
                output, _ = process.communicate(timeout=PLAY_TIMEOUT)
            except Exception:
                process.kill()
                output, _ = process.communicate()
            if process.returncode != 0:
                words = [line for line in output.splitlines() if line.startswith("Error:")] or output.splitlines()[-1:]
                failures.append(f"pod {pod_name(record.name, index)}: {' '.join(words) or process.returncode}")
        if failures:
            self._remove_pods(rendered, indexes)
            hint = ""
            if any(word in f for f in failures for word in PULL_FAILURES):
                hint = " (an image could not be pulled: build ours with `make images`; see `podman images`)"
            raise BackendError(f"`podman kube play` failed for {len(failures)} pod(s): {'; '.join(failures)}{hint}")
        self._apply_requests(record, rendered, indexes, runner)

    def _apply_requests(self, record: PodmanRecord, rendered: Rendered, indexes: Iterable[int], runner: str) -> None:
        """cpu.shares from the template's CPU request, as the kubelet sets them (podman 4.3's kube play maps only
        limits), recorded as each pod's request; a container that already finished has nothing left to weigh."""
        cpu = cpu_request(rendered, runner)
        if cpu is None:
            return
        milli = cpu_millicores(cpu)
        requests = {**record.cpu, **{str(i): milli for i in indexes}}
        self.store.save(replace(record, cpu=requests))
        for index in indexes:
            self._set_shares(rendered.name, index, runner, milli, check=False)

    def _set_shares(self, name: str, index: int, runner: str, milli: int, check: bool = True) -> None:
        self.podman.run(
            ["update", "--cpu-shares", str(millicores_to_shares(milli)), container_name(name, index, runner)],
            f"setting the CPU of pod {name}-{index} (index {index}) to {format_millicores(milli)}",
            check=check,
        )

    def _synced(self, record: PodmanRecord, mc: MiniCluster) -> list[PodmanPod]:
        """The pods, after giving any restarted container its recorded request back (a new container starts
        with podman's default weight; the kubelet re-applies a pod's request on restart the same way)."""
        pods = self._pods(record.name, mc)
        stale = [
            p
            for p in pods
            if p.pid is not None
            and (want := record.cpu_of(p.index)) is not None
            and p.cpu_shares is not None
            and p.cpu_shares != millicores_to_shares(want)
        ]
        for pod in stale:
            self._set_shares(record.name, pod.index, self._runner(mc), record.cpu_of(pod.index) or 0, check=False)
        return self._pods(record.name, mc) if stale else pods

    def _remove_pods(self, rendered: Rendered, indexes: Iterable[int]) -> None:
        """Remove pods with their containers and every volume they own (missing ones are fine)."""
        indexes = list(indexes)
        pods = [pod_name(rendered.name, i) for i in indexes]
        if pods:
            self._remove_pod_list(pods)
        volumes = [v for i in indexes for v in owned_volumes(rendered, i)]
        existing = self.podman.run(["volume", "ls", "--format", "{{.Name}}"], "listing volumes").stdout.split()
        doomed = [v for v in volumes if v in existing]
        if doomed:
            self.podman.run(["volume", "rm", "--force", *doomed], f"removing volumes of {rendered.name}")

    def _remove_pod_list(self, pods: list[str]) -> None:
        """Kill the pods that exist, then `podman pod rm --force`, tried again while it fails: on a loaded machine
        a container may still be stopping, or its cgroup still busy, when the first removal reaches it; the last
        failure is raised.

        Killed first because a removal stops one container at a time, each waiting up to its grace: 4 pods took
        16.8 s to remove here when the entrypoint's bash (PID 1) still ignored SIGTERM, killed and removed 2.8 s.
        `pod kill` stops at the first name it does not know, hence the list.
        """
        listed = self.podman.run(["pod", "ps", "--format", "{{.Name}}"], "listing pods", check=False).stdout.split()
        present = [pod for pod in pods if pod in listed]
        if present:
            self.podman.run(["pod", "kill", *present], f"killing pods {', '.join(present)}", check=False)
        argv = ["pod", "rm", "--force", "--ignore", "--time", str(STOP_GRACE_S), *pods]
        for attempt in range(POD_RM_ATTEMPTS):
            try:
                self.podman.run(argv, f"removing pods {', '.join(pods)}")
                return
            except PodmanError:
                if attempt == POD_RM_ATTEMPTS - 1:
                    raise
                self.sleep(1.0 + attempt)

    def _network(self, name: str, network: str) -> str:
        """Create the cluster's network (reused if a crashed run left it with no pod) and return its subnet."""
        inspected = self.podman.run(["network", "inspect", network], "", check=False)
        if inspected.returncode != 0:
            self.podman.run(
                ["network", "create", "--label", f"{NAME_LABEL}={name}", "--label", f"{CLUSTER_LABEL}=podman", network],
                f"creating podman network {network}",
            )
        subnet = self.podman.run(
            ["network", "inspect", network, "--format", "{{range .Subnets}}{{.Subnet}} {{end}}"],
            f"reading the subnet of network {network}",
        ).stdout.split()
        if not subnet:
            raise BackendError(f"podman network {network} has no subnet")
        return subnet[0]

    def _remove_network(self, network: str) -> None:
        try:
            self.podman.run(["network", "rm", "--force", network], f"removing network {network}")
        except PodmanError as exc:
            if "no such network" not in str(exc) and "unable to find network" not in str(exc):
                raise

    @staticmethod
    def _pinned(mc: MiniCluster, size: int, registered: int) -> dict[str, Any]:
        """The spec as stored: size as wanted, maxSize pinned to the hosts the broker config registers."""
        data = mc.to_dict()
        data["spec"] = {**data["spec"], "size": size, "maxSize": registered}
        return data

    @staticmethod
    def _with_size(record: PodmanRecord, size: int) -> PodmanRecord:
        return replace(record, spec={**record.spec, "spec": {**record.spec["spec"], "size": size}})
