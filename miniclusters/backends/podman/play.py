"""Playing and removing a podman cluster's pods, volumes and network: `podman kube play` of each pod's documents
(pods.py renders them), its Secret volume filled, its CPU request set as cpu.shares; removal that waits out
neither a grace nor a busy cgroup."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import cast

import yaml

from common import atomic
from miniclusters.api.quantity import cpu_millicores, format_millicores
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import BackendError
from miniclusters.backends.podman.bundle import BundleCache
from miniclusters.backends.podman.bundle_mount import BundleVolumes, broker_installer
from miniclusters.backends.podman.core import PodmanContext, runner_container
from miniclusters.backends.podman.engine import Podman, PodmanError
from miniclusters.backends.podman.host_files import volume_files
from miniclusters.backends.podman.netconf import read_subnet
from miniclusters.backends.podman.observe import PodmanPod, cluster_names, conmon_processes, millicores_to_shares
from miniclusters.backends.podman.pods import (
    CLUSTER_LABEL,
    Rendered,
    container_name,
    cpu_request,
    network_name,
    orphan_volumes,
    owned_name,
    owned_volumes,
    play_documents,
    pod_address,
    pod_name,
)
from miniclusters.backends.podman.state import PodmanRecord
from miniclusters.kube_shapes import Pod
from miniclusters.render.layout import NAME_LABEL, VOLUME_RUN

FILES_DIR = "files"
"""Beside a cluster's record: its ConfigMap and Secret volumes' files (host_files.py)."""
PLAY_TIMEOUT = 300.0
"""Seconds one `podman kube play` may take (it returns once the init container has copied the broker in)."""
PULL_FAILURES = ("initializing source", "pinging container registry", "image not known")
STOP_GRACE_S = 1
"""Seconds between SIGTERM and SIGKILL when pods are removed (the entrypoint passes SIGTERM on to its brokers, but
they keep nothing that needs a clean exit, so a longer grace would only delay `down`)."""
YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""libyaml's safe dumper where PyYAML has it (the same text, a fifth of the pure-Python dumper's 2 ms a pod)."""
POD_RM_ATTEMPTS = 3
CLEANUP_WAIT_S = 10.0
CLEANUP_POLL_S = 0.05


class PodPlayer:
    """Starts and removes what podman holds for a cluster; given the context only."""

    def __init__(self, ctx: PodmanContext) -> None:
        self._ctx = ctx
        self._bundles = BundleCache(ctx.podman)

    @property
    def _podman(self) -> Podman:
        return self._ctx.podman

    def remove_labelled(self, name: str) -> None:
        """Everything podman holds with our labels for `name` (when its record is gone)."""
        labels = ["--filter", f"label={NAME_LABEL}={name}", "--filter", f"label={CLUSTER_LABEL}=podman"]
        pods = self._podman.run(["pod", "ps", "--format", "{{.Name}}", *labels], "listing pods").stdout.split()
        if pods:
            self._remove_pod_list(pods)
        volumes = self._podman.run(["volume", "ls", "-q", *labels], "listing volumes").stdout.split()
        if volumes:
            self._podman.run(["volume", "rm", "--force", *volumes], f"removing the volumes of {name}")
        every = self._podman.run(["volume", "ls", "--format", "{{.Name}}"], "listing volumes").stdout.split()
        known = {*self._ctx.store.names(), *cluster_names(self._podman)}
        for volume in orphan_volumes(name, every, known):  # one at a time, unforced: one still in use stays
            self._podman.run(["volume", "rm", volume], f"removing volume {volume}", check=False)
        self.remove_network(network_name(name))

    def _write_files(self, record: PodmanRecord, rendered: Rendered) -> str:
        """The ConfigMap's and the Secret's volumes as host directories beside the record (mode 0700, its files
        at their volume's modes), which every pod bind-mounts read-only (host_files.py); each file replaced
        whole, so a pod never reads half of one."""
        root = self._ctx.store.path(record.name).parent / FILES_DIR
        spec = rendered.job["spec"]["template"]["spec"]
        for volume, files in volume_files(spec, rendered.config_map, rendered.secret).items():
            for path, (data, mode) in files.items():
                target = root / volume / path
                target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                atomic.write_bytes(target, data, mode=mode)
                target.chmod(mode)  # as the volume says, whatever the umask
        root.chmod(0o700)
        return str(root)

    def bundle(self, rendered: Rendered, indexes: Iterable[int]) -> BundleVolumes:
        """The broker bundle's volumes the pods of `indexes` mount (bundle.py; none: their init containers copy)."""
        return self._bundles.volumes(broker_installer(rendered.job["spec"]["template"]["spec"]), sorted(indexes))

    def play(
        self,
        record: PodmanRecord,
        rendered: Rendered,
        indexes: Iterable[int],
        runner: str,
        lead_restarts: bool,
        bundle: BundleVolumes | None = None,
    ) -> None:
        """`podman kube play` each pod (all at once), mounting `bundle` (looked up here when not given); on any
        failure remove the pods of this call and raise."""
        indexes = sorted(indexes)
        registered = record.registered
        started = []
        files = self._write_files(record, rendered)
        bundle = self.bundle(rendered, indexes) if bundle is None else bundle
        for index in indexes:
            documents = play_documents(rendered, index, record.subnet, registered, bundle, files)
            if index == 0 and not lead_restarts:
                cast(Pod, documents[-1])["spec"]["restartPolicy"] = "Never"  # the lead's exit is the cluster's result
            path = self._ctx.store.path(record.name).parent / f"pod-{index}.yaml"
            path.write_text(yaml.dump_all(documents, Dumper=YAML_DUMPER, sort_keys=False))
            argv = ["kube", "play", "--network", record.network, "--ip", pod_address(record.subnet, index), str(path)]
            started.append((index, self._podman.start(argv)))
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
            self.remove_pods(rendered, indexes)
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
        self._ctx.store.save(replace(record, cpu=requests))
        indexes = list(indexes)
        with ThreadPoolExecutor(max_workers=max(1, len(indexes))) as pool:  # one `podman update` per container
            list(pool.map(lambda i: self.set_shares(rendered.name, i, runner, milli, check=False), indexes))

    def set_shares(self, name: str, index: int, runner: str, milli: int, check: bool = True) -> None:
        self._podman.run(
            ["update", "--cpu-shares", str(millicores_to_shares(milli)), container_name(name, index, runner)],
            f"setting the CPU of pod {name}-{index} (index {index}) to {format_millicores(milli)}",
            check=check,
        )

    def synced(self, record: PodmanRecord, mc: MiniCluster, read: list[PodmanPod] | None = None) -> list[PodmanPod]:
        """The pods (`read`: as just read), after giving any restarted container its recorded request back (a
        new container starts with podman's default weight; the kubelet re-applies a pod's request on restart
        the same way)."""
        pods = self._ctx.pods(record.name, mc) if read is None else read
        stale = [
            p
            for p in pods
            if p.pid is not None
            and (want := record.cpu_of(p.index)) is not None
            and p.cpu_shares is not None
            and p.cpu_shares != millicores_to_shares(want)
        ]
        for pod in stale:
            self.set_shares(record.name, pod.index, runner_container(mc), record.cpu_of(pod.index) or 0, check=False)
        return self._ctx.pods(record.name, mc) if stale else pods

    def remove_pods(self, rendered: Rendered, indexes: Iterable[int]) -> None:
        """Remove pods with their containers and every volume they own (missing ones are fine)."""
        indexes = list(indexes)
        pods = [pod_name(rendered.name, i) for i in indexes]
        if pods:
            self._remove_pod_list(pods)
        volumes = [v for i in indexes for v in owned_volumes(rendered, i)]
        existing = self._podman.run(["volume", "ls", "--format", "{{.Name}}"], "listing volumes").stdout.split()
        doomed = [v for v in volumes if v in existing]
        if doomed:
            self._podman.run(["volume", "rm", "--force", *doomed], f"removing volumes of {rendered.name}")

    def _remove_pod_list(self, pods: list[str]) -> None:
        """Kill the pods that exist, let podman's cleanup of their containers finish, then `podman pod rm
        --force`, tried again while it fails (on a loaded machine a container may still be stopping when the
        first removal reaches it); the last failure is raised.

        Killed first because a removal stops one container at a time, each waiting up to its grace (4 pods took
        16.8 s to remove when the entrypoint's bash ignored SIGTERM). Waited for because each killed container's
        conmon starts a `podman container cleanup` in the pod's cgroup, which waits for the lock a `pod rm`
        holds while that `pod rm` waits for the cgroup to empty: podman breaks the tie by signalling the
        cgroup's processes after 3 s, pod after pod (3.7 s of a 4-pod `down`). `pod kill` stops at the first
        name it does not know, hence the list.
        """
        listed = self._podman.run(
            ["pod", "ps", "--no-trunc", "--format", "{{.Name}} {{.ID}}"], "listing pods", check=False
        ).stdout.splitlines()
        ids = dict(line.split()[:2] for line in listed if len(line.split()) >= 2)
        present = [pod for pod in pods if pod in ids]
        if present:
            self._podman.run(["pod", "kill", *present], f"killing pods {', '.join(present)}", check=False)
            self._await_cleanup([ids[pod] for pod in present])
        argv = ["pod", "rm", "--force", "--ignore", "--time", str(STOP_GRACE_S), *pods]
        for attempt in range(POD_RM_ATTEMPTS):
            try:
                self._podman.run(argv, f"removing pods {', '.join(pods)}")
                return
            except PodmanError:
                if attempt == POD_RM_ATTEMPTS - 1:
                    raise
                self._ctx.sleep(1.0 + attempt)

    def _await_cleanup(self, pod_ids: list[str]) -> None:
        """Until no conmon (nor the cleanup it started) is left in the pods' cgroups, or CLEANUP_WAIT_S passed
        (then the removal goes ahead as before)."""
        clock, deadline = self._ctx.polling.clock, self._ctx.polling.clock() + CLEANUP_WAIT_S
        while conmon_processes(pod_ids) and clock() < deadline:
            self._ctx.sleep(CLEANUP_POLL_S)

    def run_dir(self, name: str, index: int) -> Path:
        """Where pod `index`'s run directory (its emptyDir at /run/flux) is on this machine: its volume's."""
        volume = owned_name(name, index, VOLUME_RUN)
        done = self._podman.run(["volume", "inspect", "--format", "{{.Mountpoint}}", volume], f"inspecting {volume}")
        return Path(done.stdout.strip()) / "rundir"  # the entrypoint's -Srundir=/run/flux/rundir

    def create_network(self, name: str, network: str) -> tuple[str, bool]:
        """Create the cluster's network (reused if a crashed run left it with no pod); its subnet (from the file
        podman wrote, else asked: netconf.py), and whether this call made it (so a refused `up` removes only what
        it made)."""
        labels = ["--label", f"{NAME_LABEL}={name}", "--label", f"{CLUSTER_LABEL}=podman"]
        made = True
        try:
            self._podman.run(["network", "create", *labels, network], f"creating podman network {network}")
        except PodmanError as exc:
            if "already exists" not in exc.stderr:
                raise
            made = False
        known = read_subnet(network)
        if known is not None:
            return known, made
        subnet = self._podman.run(
            ["network", "inspect", network, "--format", "{{range .Subnets}}{{.Subnet}} {{end}}"],
            f"reading the subnet of network {network}",
        ).stdout.split()
        if not subnet:
            raise BackendError(f"podman network {network} has no subnet")
        return subnet[0], made

    def remove_network(self, network: str) -> None:
        try:
            self._podman.run(["network", "rm", "--force", network], f"removing network {network}")
        except PodmanError as exc:
            if "no such network" not in str(exc) and "unable to find network" not in str(exc):
                raise
