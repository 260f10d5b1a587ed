"""What every part of the podman backend shares: the podman handle, the store, loading and rendering a cluster,
reading its pods and reaching into one.

The backend is made of parts, each given only what it needs and composed by backend.py, as the Kubernetes and
local backends are: this context, play.py (playing and removing pods, volumes, the network), lifecycle.py
(create, exists, delete), observer.py (status, the Observer port, list) and actuate.py (scale and resize: the
actuator).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

from broker.curve_cert import parse_zcert
from miniclusters.api import SpecError, load_minicluster
from miniclusters.api.spec import DEFAULT_FLUX_VIEW_IMAGE, MiniCluster
from miniclusters.backends import exec_session
from miniclusters.backends.base import BackendError, ExecResult, NotFoundError, no_such_pod
from miniclusters.backends.pod_flux import flux_argv, flux_env, flux_path_script
from miniclusters.backends.podman.engine import Podman
from miniclusters.backends.podman.observe import PodmanPod, inspect_pods, read_pods
from miniclusters.backends.podman.pods import Rendered, container_name
from miniclusters.backends.podman.restarts import RestartLedger, seen_of
from miniclusters.backends.podman.state import PodmanRecord, PodmanStore
from miniclusters.backends.reporting import Polling
from miniclusters.render import RenderOptions, render_objects
from miniclusters.render.layout import NAME_LABEL, RUN_DIR


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


class PodmanContext:
    """The podman handle, the store, the namespace status reports, how to wait, and the helpers every part uses:
    loading a cluster, rendering it, reading its pods, reaching into one (it holds no cluster state: that lives
    in the store and in podman)."""

    def __init__(self, podman: Podman, store: PodmanStore, namespace: str, polling: Polling) -> None:
        self.podman = podman
        self.store = store
        self.namespace = namespace
        self.polling = polling

    @property
    def sleep(self) -> Callable[[float], None]:
        return self.polling.sleep

    def load(self, name: str) -> tuple[PodmanRecord, MiniCluster]:
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

    def rendered(self, record: PodmanRecord, mc: MiniCluster) -> Rendered:
        """The objects `minicluster render` emits for this cluster now (same keypair, same images)."""
        options = RenderOptions(
            registry=record.registry,
            tag=record.tag,
            namespace=self.namespace,
            certificate=parse_zcert(record.certificate),
        )
        return Rendered.from_rendered(render_objects(mc, options))

    def pods(self, name: str, mc: MiniCluster) -> list[PodmanPod]:
        return read_pods(self.podman, name, runner_container(mc))

    def started_pods(self, name: str, mc: MiniCluster, indexes: Iterable[int]) -> list[PodmanPod]:
        """The pods of `indexes` just played: their containers inspected, not listed first."""
        return inspect_pods(self.podman, name, runner_container(mc), indexes)

    def restarts(self, name: str, pods: list[PodmanPod]) -> dict[int, int]:
        """Each pod's restarts, never fewer than last seen (restarts.py: podman forgets on `podman start`)."""
        seen = {p.index: seen_of(p.container) for p in pods if p.container is not None}
        return RestartLedger(self.store.path(name).parent).update(seen)

    def require_index(self, name: str, mc: MiniCluster, index: int) -> PodmanPod:
        pods = {p.index: p for p in self.pods(name, mc)}
        if index not in pods:
            raise no_such_pod(name, index, pods, mc.spec.size)
        return pods[index]

    def run_in_pod(self, name: str, mc: MiniCluster, index: int, argv: list[str], timeout: float) -> ExecResult:
        """argv in pod `index`'s application container. A killed `podman exec` leaves its process running in the
        container: past the timeout, or interrupted (SIGTERM to `minicluster exec`), the exec's marked processes
        are ended there (exec_session.py)."""
        container = container_name(name, index, runner_container(mc))
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


def in_pod(mc: MiniCluster, index: int, argv: list[str]) -> list[str]:
    """argv (a bare `flux` the pod's own) with the pod's `flux` on PATH and FLUX_URI at the pod's broker socket when
    it is open (as in the local backend's exec): `local-<rank>` under flux-core, `local` under the built-in broker."""
    sockets = " ".join(f'"{RUN_DIR}/rundir/{name}"' for name in (f"local-{index}", "local"))
    sockets_loop = f'for s in {sockets}; do if [ -S "$s" ]; then export FLUX_URI="local://$s"; break; fi; done'
    script = f'{flux_path_script(mc)}; {sockets_loop}; exec "$@"'
    return ["env", *flux_env(mc), "sh", "-c", script, "sh", *flux_argv(mc, argv)]
