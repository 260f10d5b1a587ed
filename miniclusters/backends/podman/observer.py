"""The podman observer: a cluster's status (its pods, what the lead broker says), the Observer port's view (no
exec into the lead) and the list of clusters, read through the context; any restarted container gets its
recorded CPU request back first (play.PodPlayer.synced)."""

from __future__ import annotations

from elasticity.control.ports import ClusterView
from miniclusters.api.spec import MiniCluster
from miniclusters.backends.base import BackendError, ClusterStatus, ClusterSummary
from miniclusters.backends.overlay import overlay_argv, overlay_ranks
from miniclusters.backends.podman.core import PodmanContext
from miniclusters.backends.podman.observe import PodmanPod, cluster_names, phase_of, pod_status, this_machine
from miniclusters.backends.podman.play import PodPlayer
from miniclusters.backends.podman.pods import pod_address
from miniclusters.backends.reporting import LeadReport, Ranks, cluster_status, cluster_view, pod_view
from miniclusters.backends.states import cluster_state

LEAD_ASK_TIMEOUT = 20.0


class PodmanObserver:
    """status, observe and list: given the context and the pod player (for the CPU requests it restores)."""

    def __init__(self, ctx: PodmanContext, player: PodPlayer) -> None:
        self._ctx = ctx
        self._player = player

    def status(self, name: str, ranks: Ranks | None = None, read: list[PodmanPod] | None = None) -> ClusterStatus:
        """The cluster's status; `ranks` is what the lead just said (ready.py), so it is not asked again, and
        `read` its pods as just read (`up` inspected them as its plays returned)."""
        record, mc = self._ctx.load(name)
        pods = self._player.synced(record, mc, read)
        restarts = self._ctx.restarts(name, pods)
        lead_pod = next((p for p in pods if p.index == 0), None)
        phase, _, reason = phase_of(lead_pod) if lead_pod is not None else ("Pending", None, None)
        finished = phase in ("Succeeded", "Failed") and not mc.spec.interactive
        running = phase == "Running" and reason is None
        report = LeadReport.asked(running, finished, lambda: ranks if ranks is not None else self._ask_lead(name, mc))
        statuses = tuple(pod_status(p, record.cpu_of(p.index), report.ranks_up, restarts.get(p.index)) for p in pods)
        lead = statuses[0] if statuses and statuses[0].index == 0 else None
        rest_url = f"http://{pod_address(record.subnet, 0)}:{mc.spec.restful.port}" if mc.spec.restful.enabled else None
        succeeded = (lead.phase == "Succeeded") if finished and lead else None
        return cluster_status(mc, self._ctx.namespace, statuses, report, finished, succeeded, rest_url)

    def _ask_lead(self, name: str, mc: MiniCluster) -> Ranks:
        result = self._ctx.run_in_pod(name, mc, 0, overlay_argv(mc.spec.flux.flavour), timeout=LEAD_ASK_TIMEOUT)
        return overlay_ranks(result)

    def observe(self, name: str) -> ClusterView:
        """The Observer port: one `pod ps` and one `container inspect` (no exec into the lead)."""
        record, mc = self._ctx.load(name)
        pods = self._player.synced(record, mc)
        restarts = self._ctx.restarts(name, pods)
        views = []
        for pod in pods:
            status = pod_status(pod, record.cpu_of(pod.index), restarts=restarts.get(pod.index))
            views.append(pod_view(status, status.restarts))
        return cluster_view(
            mc, tuple(views), mc.spec.effective_max_size, self._ctx.polling.clock(), nodes=(this_machine(),)
        )

    def runner_identity(self, name: str) -> dict[int, object]:
        """Pod index -> (its application container's PID, start time): what a resize in place leaves alone and a
        recreated pod or restarted container changes (the multiplexing controller's same-PIDs check)."""
        _, mc = self._ctx.load(name)
        pods = self._ctx.pods(name, mc)
        return {p.index: (p.pid, (p.container or {}).get("State", {}).get("StartedAt")) for p in pods}

    def list(self) -> list[ClusterSummary]:
        out = []
        store, namespace = self._ctx.store, self._ctx.namespace
        for name in sorted(set(store.names())):
            try:
                status = self.status(name)
            except BackendError:
                continue
            out.append(ClusterSummary(name, namespace, status.size, status.ready_pods, cluster_state(status)))
        for name in sorted(set(cluster_names(self._ctx.podman)) - set(store.names())):
            out.append(ClusterSummary(name, namespace, 0, 0, "Unknown"))  # its record is in another state dir
        return out
