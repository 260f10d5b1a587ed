"""The podman backend: the objects `minicluster render` emits, played as real OCI pods on this machine.

Each index of the rendered Indexed Job becomes one pod (`podman kube play` of its pod template, pods.py), on a
podman network of its own (`minicluster-<name>`), at a fixed address that every pod's /etc/hosts names with the
headless Service's DNS names. The init container copies the broker into the shared volume, the application
container runs the rendered entrypoint from the spec's image: nothing is templated twice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from broker.curve_cert import render_zcert
from elasticity.control.ports import ClusterView, PodView
from miniclusters.api.quantity import cpu_millicores
from miniclusters.api.spec import MiniCluster
from miniclusters.backends import exec_session
from miniclusters.backends.base import (
    EXEC_TIMEOUT,
    BackendError,
    ClusterStatus,
    ClusterSummary,
    CreateOptions,
    ExecResult,
    InvalidRequestError,
    NotFoundError,
    RestEndpoint,
)
from miniclusters.backends.overlay import lead_ranks, overlay_argv, overlay_ranks
from miniclusters.backends.podman.actuate import PodmanActuator
from miniclusters.backends.podman.core import with_view_image
from miniclusters.backends.podman.observe import cluster_names, phase_of, pod_status, this_machine
from miniclusters.backends.podman.pods import container_name, network_name, pod_address
from miniclusters.backends.podman.state import PodmanRecord
from miniclusters.backends.states import cluster_state
from miniclusters.backends.wait import wait_until_ready
from miniclusters.render import with_flavour
from miniclusters.render.layout import BROKER_INSTALL_DIR, RUN_DIR
from miniclusters.render.objects import certificate_for

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def flux_bin(mc: MiniCluster) -> str:
    """Where the pod's `flux` is: the broker the init container copied in, or the flux view's."""
    if mc.spec.flux.flavour == "builtin":
        return f"{BROKER_INSTALL_DIR}/bin"
    return f"{mc.spec.flux.container.mount_path}/view/bin"


def in_pod(mc: MiniCluster, index: int, argv: list[str]) -> list[str]:
    """argv with PATH reaching `flux` and FLUX_URI at the pod's broker socket when it is open (as in the local
    backend's exec): `local-<rank>` under flux-core, `local` under the built-in broker."""
    sockets = " ".join(f'"{RUN_DIR}/rundir/{name}"' for name in (f"local-{index}", "local"))
    script = f'for s in {sockets}; do if [ -S "$s" ]; then export FLUX_URI="local://$s"; break; fi; done; exec "$@"'
    return ["env", f"PATH={flux_bin(mc)}:{SYSTEM_PATH}", "sh", "-c", script, "sh", *argv]


class PodmanBackend(PodmanActuator):
    """Backend over podman 4.3+ (`kube play`, `update --cpu-shares`), root, on this machine."""

    def rest_endpoint(self, mc: MiniCluster, status: ClusterStatus) -> RestEndpoint:
        """The lead pod's address on the cluster's network, reachable from this machine (the bridge)."""
        record, _ = self._load(mc.name)
        url = f"http://{pod_address(record.subnet, 0)}:{mc.spec.restful.port}"
        return RestEndpoint(url, f"the lead pod's address on podman network {record.network}")

    def exists(self, mc: MiniCluster) -> bool:
        return self.store.exists(mc.name) or mc.name in cluster_names(self.podman)

    def stored_spec(self, name: str) -> dict[str, Any] | None:
        """The spec a cluster of this name was created from (None when there is none)."""
        return self.store.load(name).spec if self.store.exists(name) else None

    def create(self, mc: MiniCluster, options: CreateOptions | None = None) -> ClusterStatus:
        """Network, then every pod of the first `size` indexes at once; wait for pods and brokers."""
        options = options or CreateOptions()
        mc = with_view_image(with_flavour(mc, options.render.flavour), options.render.registry, options.render.tag)
        if self.exists(mc):
            raise InvalidRequestError(
                f"MiniCluster {mc.name!r} already exists on the podman backend; remove it with "
                f"`minicluster down {mc.name} --backend podman`"
            )
        registered = mc.spec.effective_max_size
        certificate = certificate_for(mc, options.render.certificate)
        network = network_name(mc.name)
        subnet = self._network(mc.name, network)
        record = PodmanRecord(
            name=mc.name,
            spec=self._pinned(mc, mc.spec.size, registered),
            registry=options.render.registry,
            tag=options.render.tag,
            certificate=render_zcert(certificate),
            network=network,
            subnet=subnet,
        )
        try:
            pod_address(subnet, registered - 1)
            self.store.save(record)
            rendered = self._rendered(record, mc)
            self._play(record, rendered, range(mc.spec.size), self._runner(mc), lead_restarts=mc.spec.interactive)
        except ValueError as exc:
            self._teardown(mc.name)
            raise InvalidRequestError(f"spec.maxSize: {exc}") from None
        except BaseException:
            self._teardown(mc.name)
            raise
        if not options.wait:
            return self.status(mc.name)
        return wait_until_ready(
            lambda: self.status(mc.name),
            timeout=options.timeout,
            clock=self.clock,
            sleep=self.sleep,
            interval=self.poll_interval,
            progress=self.progress,
        )

    def status(self, name: str) -> ClusterStatus:
        record, mc = self._load(name)
        pods = self._synced(record, mc)
        restarts = self._restarts(name, pods)
        lead_pod = next((p for p in pods if p.index == 0), None)
        phase, _, reason = phase_of(lead_pod) if lead_pod is not None else ("Pending", None, None)
        finished = phase in ("Succeeded", "Failed") and not mc.spec.interactive
        running = phase == "Running" and reason is None
        ranks_up, ranks_down, lead_error = lead_ranks(running, finished, lambda: self._ask_lead(name, mc))
        statuses = tuple(pod_status(p, record.cpu_of(p.index), ranks_up, restarts.get(p.index)) for p in pods)
        lead = statuses[0] if statuses and statuses[0].index == 0 else None
        return ClusterStatus(
            name=name,
            namespace=self.namespace,
            size=mc.spec.size,
            max_size=mc.spec.effective_max_size,
            min_size=mc.spec.min_size,
            pods=statuses,
            ranks_up=ranks_up,
            ranks_down=ranks_down,
            finished=finished,
            succeeded=(lead.phase == "Succeeded") if finished and lead else None,
            lead_error=lead_error,
            rest_url=(
                f"http://{pod_address(record.subnet, 0)}:{mc.spec.restful.port}" if mc.spec.restful.enabled else None
            ),
        )

    def _ask_lead(self, name: str, mc: MiniCluster) -> tuple[tuple[int, ...], tuple[int, ...]]:
        result = self._exec(name, mc, 0, overlay_argv(mc.spec.flux.flavour), timeout=20.0)
        return overlay_ranks(result)

    def observe(self, name: str) -> ClusterView:
        """The Observer port: one `pod ps` and one `container inspect` (no exec into the lead)."""
        record, mc = self._load(name)
        views = []
        pods = self._synced(record, mc)
        restarts = self._restarts(name, pods)
        for pod in pods:
            status = pod_status(pod, record.cpu_of(pod.index), restarts=restarts.get(pod.index))
            views.append(
                PodView(
                    index=status.index,
                    name=status.name,
                    phase=status.phase,
                    ready=status.ready,
                    cpu_request=cpu_millicores(status.cpu_desired) if status.cpu_desired else None,
                    cpu_actual=cpu_millicores(status.cpu_actual) if status.cpu_actual else None,
                    restarts=status.restarts,
                    node=status.node,
                )
            )
        return ClusterView(
            name=name,
            size=mc.spec.size,
            min_size=mc.spec.min_size,
            max_size=mc.spec.effective_max_size,
            pods=tuple(views),
            nodes=(this_machine(),),
            observed_at=self.clock(),
        )

    def _exec(self, name: str, mc: MiniCluster, index: int, argv: list[str], timeout: float) -> ExecResult:
        """A killed `podman exec` leaves its process running in the container: past the timeout, or interrupted
        (SIGTERM to `minicluster exec`), the exec's marked processes are ended there (exec_session.py)."""
        container = container_name(name, index, self._runner(mc))
        token = exec_session.new_token()
        command = ["exec", "--env", f"{exec_session.EXEC_VARIABLE}={token}", container, *in_pod(mc, index, argv)]
        try:
            done = self.podman.run(command, "", check=False, timeout=timeout)
        except BaseException:
            with contextlib.suppress(BackendError):  # best effort: what went wrong first is what to report
                self.podman.run(["exec", container, *exec_session.end_argv(token)], "", check=False, timeout=60.0)
            raise
        if done.returncode == 125 and ("no such container" in done.stderr or "not running" in done.stderr):
            raise BackendError(f"pod {name}-{index} (index {index}) is not running; see `minicluster status {name}`")
        return ExecResult(done.returncode, done.stdout, done.stderr)

    def exec(self, name: str, index: int, argv: list[str], timeout: float = EXEC_TIMEOUT) -> ExecResult:
        _, mc = self._load(name)
        self._require_index(name, mc, index)
        return self._exec(name, mc, index, argv, timeout=timeout)

    def logs(self, name: str, index: int = 0, follow: bool = False) -> Iterator[str]:
        _, mc = self._load(name)
        self._require_index(name, mc, index)
        container = container_name(name, index, self._runner(mc))
        argv = ["logs", *(["--follow"] if follow else []), container]
        yield from self.podman.lines(argv)

    def delete(self, name: str) -> None:
        """Every pod, container, volume and the network of the cluster; then its record."""
        if not self.store.exists(name) and name not in cluster_names(self.podman):
            raise NotFoundError(f"MiniCluster {name!r} not found on the podman backend")
        self._teardown(name)

    def _teardown(self, name: str) -> None:
        if self.store.exists(name):
            record, mc = self._load(name)
            rendered = self._rendered(record, mc)
            self._remove_pods(rendered, range(int(record.spec["spec"]["maxSize"])))
            self._remove_network(record.network)
        else:  # only podman knows it (a record lost): remove by label
            self._remove_labelled(name)
        self.store.remove(name)

    def list(self) -> list[ClusterSummary]:
        out = []
        for name in sorted(set(self.store.names())):
            try:
                status = self.status(name)
            except BackendError:
                continue
            out.append(ClusterSummary(name, self.namespace, status.size, status.ready_pods, cluster_state(status)))
        for name in sorted(set(cluster_names(self.podman)) - set(self.store.names())):
            out.append(ClusterSummary(name, self.namespace, 0, 0, "Unknown"))  # its record is in another state dir
        return out
