"""The operator's loop: watches feed a rate-limited work queue; each key is reconciled by observe -> plan -> act.

Handlers are thin: reading and writing go through the KubeApi; every decision is in `reconcile.plan`.
Transient errors (429, 5xx), conflicts (409) and anything unexpected requeue the key with exponential back-off;
the loop itself never dies on one bad cluster. Clock, wall clock and sleep are injected for tests.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import cast

from miniclusters.api.spec import MiniCluster
from miniclusters.api.status import CampaignStatusJson, MultiplexingStatusJson, StatusJson
from miniclusters.backends.kubernetes.api import (
    CONFIG_MAP,
    FLUX_MINICLUSTER,
    JOB,
    MINICLUSTER,
    POD,
    SECRET,
    SERVICE,
    ApiError,
    Kind,
    KubeApi,
)
from miniclusters.campaign.progress import CampaignProgress
from miniclusters.kube_shapes import Job, KubeObject, Pod
from miniclusters.operator import conditions as cond
from miniclusters.operator.autoscaling import AutoscaleSupervisor, PortsFor
from miniclusters.operator.campaign import CampaignStarter, CampaignSupervisor
from miniclusters.operator.events import event_body, rfc3339
from miniclusters.operator.forbidden import RefusedVerb, advice, refused_verb
from miniclusters.operator.loop_types import ClusterKey, Decision
from miniclusters.operator.multiplex_progress import MultiplexProgress
from miniclusters.operator.multiplexing import MultiplexStarter, MultiplexSupervisor
from miniclusters.operator.queue import WorkQueue
from miniclusters.operator.reconcile import Apply, DeleteCluster, EventSpec, Observed, Plan, ScaleJob, plan
from miniclusters.operator.watcher import Watcher
from miniclusters.render import RenderOptions
from miniclusters.render.layout import FIELD_MANAGER, NAME_LABEL

log = logging.getLogger("miniclusters.operator")
RESYNC_SECONDS = 300.0


class Controller:
    """Reconciles MiniCluster objects (ours, and optionally the Flux Operator's kind) in one or all namespaces."""

    def __init__(
        self,
        api: KubeApi,
        namespace: str | None = None,
        options: RenderOptions | None = None,
        accept_flux_kind: bool = False,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        instance: str = "miniclusters-operator",
        autoscale_ports: PortsFor | None = None,
        multiplex_start: MultiplexStarter | None = None,
        campaign_start: CampaignStarter | None = None,
    ) -> None:
        """``autoscale_ports``: how to reach a namespace's clusters and queues; without it no cluster is
        autoscaled (spec.autoscale is then left to `minicluster autoscale`). ``multiplex_start``: how to build
        a cluster's multiplexing runner; without it spec.multiplexing is left to `minicluster multiplex`.
        ``campaign_start``: how to build a cluster's campaign runner; without it spec.campaign is not run."""
        self.api = api
        self.namespace = namespace
        self.options = options or RenderOptions()
        self.kinds = [MINICLUSTER, FLUX_MINICLUSTER] if accept_flux_kind else [MINICLUSTER]
        self.clock = clock
        self.wall = wall
        self.instance = instance
        self.queue: WorkQueue[ClusterKey] = WorkQueue(clock)
        self._said_forbidden: dict[ClusterKey, str] = {}
        """The last RBAC refusal reported as an Event, by cluster (said once, logged every time)."""
        self._event_serial = 0
        self.autoscalers = (
            AutoscaleSupervisor(autoscale_ports, clock, self._report_autoscaling) if autoscale_ports else None
        )
        self.multiplexers = (
            MultiplexSupervisor(multiplex_start, clock, self._report_multiplexing, self._record_multiplexing)
            if multiplex_start
            else None
        )
        self.campaigns = (
            CampaignSupervisor(campaign_start, clock, self._report_campaign, self._record_campaign)
            if campaign_start
            else None
        )
        watched = [(kind, None) for kind in self.kinds] + [(JOB, NAME_LABEL), (POD, NAME_LABEL)]
        self.watchers = [Watcher(api, namespace, kind, selector, self.enqueue) for kind, selector in watched]

    # ------------------------------------------------------------------ keys
    def keys_for(self, obj: KubeObject) -> list[ClusterKey]:
        """The MiniCluster(s) an object belongs to: itself, or the one named by its NAME_LABEL."""
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace", "")
        if obj.get("kind") == "MiniCluster":
            return [ClusterKey(str(obj.get("apiVersion")), namespace, meta["name"])]
        name = (meta.get("labels") or {}).get(NAME_LABEL)
        if not name:
            return []
        return [ClusterKey(kind.api_version, namespace, name) for kind in self.kinds]

    def enqueue(self, obj: KubeObject) -> None:
        for key in self.keys_for(obj):
            self.queue.add(key)

    # ------------------------------------------------------------------ one reconcile
    def observe(self, key: ClusterKey) -> Observed | None:
        try:
            cluster = self._read(key.kind, key.namespace, key.name)
        except ApiError as exc:
            if exc.not_found:
                return None  # deleted: the garbage collector removes what it owned
            raise
        if cluster["metadata"].get("deletionTimestamp"):
            return None
        name, ns = key.name, key.namespace
        # Names as render/layout.py gives them (config_map_name, curve_secret_name, headless service, Job).
        return Observed(
            cluster=cluster,
            secret=self._optional(SECRET, ns, f"{name}-curve-cert"),
            config_map=self._optional(CONFIG_MAP, ns, f"{name}-flux-config"),
            service=self._service(cluster, ns),
            job=cast("Job | None", self._optional(JOB, ns, name)),  # the Job as the server has it
            pods=cast("list[Pod]", self.api.list_objects(POD, ns, f"{NAME_LABEL}={name}")[0]),  # as the server has them
        )

    def _service(self, cluster: KubeObject, namespace: str) -> KubeObject | None:
        network = (cluster.get("spec") or {}).get("network") or {}
        return self._optional(SERVICE, namespace, network.get("headlessName") or cluster["metadata"]["name"])

    def _read(self, kind: Kind, namespace: str, name: str) -> KubeObject:
        """The object as the API server has it: where what the operator reads becomes a KubeObject."""
        return self.api.get(kind, namespace, name)

    def _optional(self, kind: Kind, namespace: str, name: str) -> KubeObject | None:
        try:
            return self._read(kind, namespace, name)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    def reconcile(self, key: ClusterKey) -> Plan | None:
        """Observe, plan, act, record status. Raises ApiError for the caller to requeue."""
        observed = self.observe(key)
        if observed is None:
            if self.autoscalers is not None:
                self.autoscalers.sync(key, None, gone=True)
            if self.multiplexers is not None:
                self.multiplexers.sync(key, None, gone=True)
            if self.campaigns is not None:
                self.campaigns.sync(key, None, gone=True)
            return None
        now = rfc3339(self.wall())
        result = plan(observed, self.options, now)
        # a campaign's runner carries both loops through one plan: the standalone loops leave its cluster alone
        loops_mc = None if self._runs_campaign(result.mc) else result.mc
        if self.autoscalers is not None:
            self.autoscalers.sync(key, loops_mc.spec.autoscale if loops_mc is not None else None)
        stored = cast(StatusJson | None, observed.cluster.get("status"))  # a MiniCluster's status
        if self.multiplexers is not None:  # its first step profiles a simulation: only once every pod is ready
            ready = cond.is_true(list(result.status.get("conditions") or []), cond.READY)
            recorded_run = MultiplexProgress.from_status(stored)
            self.multiplexers.sync(key, loops_mc, ready, recorded=recorded_run)
        if self.campaigns is not None:  # its ensembles need the pods the spec starts with
            ready = cond.is_true(list(result.status.get("conditions") or []), cond.READY)
            recorded = CampaignProgress.from_status(stored)
            self.campaigns.sync(key, result.mc, ready, recorded=recorded)
        for action in result.actions:
            self._act(key, action)
        for event in result.events:
            self.emit(observed.cluster, event)
        if result.status != (observed.cluster.get("status") or {}) and not any(
            isinstance(a, DeleteCluster) for a in result.actions
        ):
            body: KubeObject = {**observed.cluster, "status": dict(result.status)}
            self.api.replace(body, subresource="status")
        return result

    def _runs_campaign(self, mc: MiniCluster | None) -> bool:
        return self.campaigns is not None and mc is not None and mc.spec.campaign is not None

    def _act(self, key: ClusterKey, action: Apply | ScaleJob | DeleteCluster) -> None:
        if isinstance(action, Apply):
            self.api.apply(action.obj, field_manager=FIELD_MANAGER, force=True)
        elif isinstance(action, ScaleJob):
            self.api.patch(JOB, key.namespace, key.name, dict(action.patch), field_manager=FIELD_MANAGER)
        else:
            self.api.delete(key.kind, key.namespace, key.name, "Foreground")

    def emit(self, cluster: KubeObject, event: EventSpec) -> None:
        """Record an events.k8s.io/v1 Event about the MiniCluster; best effort (a lost event is not an error)."""
        self._event_serial += 1
        body = event_body(cluster, event, self.wall(), self._event_serial, self.instance)
        try:
            self.api.create(cast(KubeObject, body))  # an Event: the kind's own top-level fields
        except ApiError as exc:
            log.warning("could not record event %s for %s: %s", event.reason, body["regarding"]["name"], exc)

    def _report_autoscaling(self, key: ClusterKey, decision: Decision) -> None:
        self._report_loop(key, decision, cond.AUTOSCALING, "Autoscale")

    def _report_multiplexing(self, key: ClusterKey, decision: Decision, set_condition: bool) -> None:
        self._report_loop(key, decision, cond.MULTIPLEXING if set_condition else None, "Multiplex")

    def _report_campaign(self, key: ClusterKey, decision: Decision, set_condition: bool) -> None:
        self._report_loop(key, decision, cond.CAMPAIGN if set_condition else None, "Campaign")

    def _record_campaign(self, key: ClusterKey, progress: CampaignProgress) -> bool:
        """status.campaign := progress (campaign/progress.py)."""
        return self._record_status(key, "campaign", progress.to_status())

    def _record_multiplexing(self, key: ClusterKey, progress: MultiplexProgress) -> bool:
        """status.multiplexing := progress (operator/multiplex_progress.py)."""
        return self._record_status(key, "multiplexing", progress.to_status())

    def _record_status(
        self, key: ClusterKey, field: str, value: CampaignStatusJson | MultiplexingStatusJson, attempts: int = 5
    ) -> bool:
        """status.<field> := value, read-modify-write retried on 409 Conflict; False (and a log line) when it
        could not be written: the supervisor tries again after its next step."""
        for _ in range(attempts):
            try:
                cluster = self.api.get(key.kind, key.namespace, key.name)
                status = dict(cluster.get("status") or {})
                self.api.replace({**cluster, "status": {**status, field: value}}, "status")
                return True
            except ApiError as exc:
                if not exc.conflict:
                    log.warning("%s: could not record status.%s: %s", key, field, exc)
                    return False
        log.warning("%s: could not record status.%s: %d conflicts in a row", key, field, attempts)
        return False

    def _report_loop(self, key: ClusterKey, decision: Decision, condition: str | None, action: str) -> None:
        """Set a loop's condition (when given and changed) and record the decision's Event; never raises. A loop
        that RBAC refused (its exec into the lead, a resize) says which verb on which resource."""
        refused = refused_verb(decision.message) if decision.reason == "LoopFailed" else None
        if refused is not None:
            decision = Decision(decision.status, decision.reason, advice(refused), decision.event_type)
            log.error("%s: the %s loop: %s", key, action, decision.message)
        try:
            cluster = self._read(key.kind, key.namespace, key.name)
            status = dict(cluster.get("status") or {})
            old = list(status.get("conditions") or [])
            if condition is not None:
                now = rfc3339(self.wall())
                generation = int(cluster["metadata"].get("generation") or 0)
                new = cond.set_condition(
                    old, condition, decision.status, decision.reason, decision.message, now, generation
                )
                if new != old:
                    body: KubeObject = {**cluster, "status": {**status, "conditions": new}}
                    cluster = self.api.replace(body, "status")
            if decision.event_type is not None:
                self.emit(cluster, EventSpec(decision.event_type, decision.reason, action, decision.message))
        except Exception as exc:
            log.warning("%s: could not report the %s loop's decision %s: %s", key, action, decision.reason, exc)

    # ------------------------------------------------------------------ the queue
    def process_next(self) -> bool:
        """Reconcile one due key; False when none is due. Never raises."""
        key = self.queue.pop()
        if key is None:
            return False
        try:
            self.reconcile(key)
        except ApiError as exc:
            delay = self.queue.add_rate_limited(key)
            refused = refused_verb(exc.message) if exc.status == 403 else None
            if refused is not None:
                self._forbidden(key, refused, delay)
            else:
                kind = "conflict" if exc.conflict else "transient error" if exc.transient else "API error"
                log.warning("%s: %s (%s); retrying in %.2fs", key, exc, kind, delay)
        except Exception:
            delay = self.queue.add_rate_limited(key)
            log.exception("%s: reconcile failed; retrying in %.2fs", key, delay)
        else:
            self.queue.forget(key)
        finally:
            self.queue.done(key)
        return True

    def _forbidden(self, key: ClusterKey, refused: RefusedVerb, delay: float) -> None:
        """RBAC refused a call: say which verb on which resource, in the log every time and once per verb and
        resource as a Warning Event on the MiniCluster (itself refused when events are: then the log only)."""
        said = advice(refused)
        log.error("%s: %s; retrying in %.2fs", key, said, delay)
        if self._said_forbidden.get(key) == said:
            return
        self._said_forbidden[key] = said
        try:
            cluster = self._read(key.kind, key.namespace, key.name)
        except ApiError:
            return
        self.emit(cluster, EventSpec("Warning", "Forbidden", "Reconcile", said))

    def poll_watches(self) -> None:
        for watcher in self.watchers:
            watcher.poll(timeout_seconds=0)

    def run_until_idle(self, advance: Callable[[float], None] | None = None, max_steps: int = 500) -> int:
        """Tests: pump watches and process keys until nothing is queued; `advance` moves a fake clock to the
        next back-off deadline. Returns how many reconciles ran."""
        steps = 0
        for _ in range(max_steps):
            self.poll_watches()
            if self.process_next():
                steps += 1
                continue
            due = self.queue.next_due()
            if due is None:
                return steps
            if advance is None:
                return steps
            advance(max(0.0, due - self.clock()))
        raise RuntimeError(f"not idle after {max_steps} steps")

    def start(self) -> None:
        for watcher in self.watchers:
            watcher.sync()

    def run(self, stop: threading.Event, watch_timeout: int = 60) -> None:
        """Serve until stop is set: one thread per watch and one for the autoscalers, reconciles on this one."""
        self.start()
        threads = [
            threading.Thread(target=w.run, args=(stop, watch_timeout), name=f"watch-{w.kind.plural}", daemon=True)
            for w in self.watchers
        ]
        if self.autoscalers is not None:  # its own thread: a slow lead never holds up reconciles
            threads.append(threading.Thread(target=self._autoscale, args=(stop,), name="autoscale", daemon=True))
        if self.multiplexers is not None:  # and its own: a multiplexing step execs in the lead several times
            threads.append(threading.Thread(target=self._multiplex, args=(stop,), name="multiplex", daemon=True))
        if self.campaigns is not None:  # a campaign step execs in the lead several times too
            threads.append(threading.Thread(target=self._campaign, args=(stop,), name="campaign", daemon=True))
        for thread in threads:
            thread.start()
        last_resync = self.clock()
        while not stop.is_set():
            if self.process_next():
                continue
            if self.clock() - last_resync > RESYNC_SECONDS:
                self.watchers[0].resync()
                last_resync = self.clock()
            due = self.queue.next_due()
            self.queue.wait(1.0 if due is None else min(1.0, max(0.01, due - self.clock())))

    def _autoscale(self, stop: threading.Event) -> None:
        """Step the due autoscalers until stop is set (steps never raise; see AutoscaleSupervisor)."""
        assert self.autoscalers is not None
        while not stop.is_set():
            self.autoscalers.step_due()
            due = self.autoscalers.next_due()
            stop.wait(1.0 if due is None else min(1.0, max(0.05, due - self.clock())))

    def _multiplex(self, stop: threading.Event) -> None:
        """Step the due multiplexing runners until stop is set (steps never raise; see MultiplexSupervisor)."""
        assert self.multiplexers is not None
        while not stop.is_set():
            self.multiplexers.step_due()
            due = self.multiplexers.next_due()
            stop.wait(1.0 if due is None else min(1.0, max(0.05, due - self.clock())))

    def _campaign(self, stop: threading.Event) -> None:
        """Step the due campaigns until stop is set (steps never raise; see CampaignSupervisor)."""
        assert self.campaigns is not None
        while not stop.is_set():
            self.campaigns.step_due()
            due = self.campaigns.next_due()
            stop.wait(1.0 if due is None else min(1.0, max(0.05, due - self.clock())))
