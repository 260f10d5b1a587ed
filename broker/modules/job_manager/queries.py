"""Queries: what `flux jobs`, `flux job info` and the REST API read (list, info, stats), and annotations.
Holds no state of its own: it reads the job table, the queue and the executions."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...bootstrap import compress_hosts
from ...burst_service import pending_note
from ...jobs.history_slice import SliceError, parse_slice
from ...jobs.info import job_info, job_owner, owned_by
from ...jobs.jobspec import JobspecError
from ...jobs.record import JobRecord
from ...jobs.rest_records import detail_record
from ...jobs.shapes import JobInfoRecord, JobInfoWithSpec, JobStats, ResourceVertex
from ...jobs.states import ACTIVE, JobState
from ...jsontext import dumps
from ...payloads import Empty, ServiceView
from ...protocol import EINVAL
from ...service import Request, ServiceError
from .replies import HistoryReply
from .roles import ExecutionsRole, QueueRole
from .table import JobTable
from .warmer import ViewWarmer

if TYPE_CHECKING:
    from ...jobs.api import JobInfo

RENDERERS: dict[str, Callable[[JobInfoRecord], str]] = {
    "job-list": dumps,  # what `flux jobs` and JobClient read
    "restful": lambda info: dumps(detail_record(_job_info(info))),  # GET /v1/jobs?details, passed on
}
"""job-manager.list's views of a job, each as JSON made from its job-list view (Queries.info)."""


def _job_info(info: JobInfoRecord) -> JobInfo:
    """JobInfo.from_dict, the client's job API imported on the first REST listing: an idle broker needs none."""
    from ...jobs.api import JobInfo

    return JobInfo.from_dict(info)


class Queries:
    """Reads only: the table's records rendered, the queue's and the executions' counts; `hostnames` and
    `burst_view` are the broker's now (a burst changes both)."""

    def __init__(
        self,
        hostnames: Callable[[], list[str]],
        burst_view: Callable[[], ServiceView],
        table: JobTable,
        queue: QueueRole,
        executions: ExecutionsRole,
        warmer: ViewWarmer,
    ) -> None:
        self._hostnames = hostnames
        self._burst_view = burst_view
        self._table = table
        self._queue = queue
        self._executions = executions
        self._warmer = warmer

    def info(self, record: JobRecord) -> JobInfoRecord:
        hostnames = self._hostnames()
        nodelist = compress_hosts([hostnames[r] for r in record.ranks if r < len(hostnames)]) if record.ranks else ""
        requested: int | None = None
        try:
            if record.state != JobState.INACTIVE:
                resources = self._table.spec(record).resources  # parsed once per job, kept (a listing reads all)
                ntasks, requested = resources.ntasks, (resources.nnodes or 0)
            else:
                ntasks = -1
        except JobspecError:
            ntasks = 1
        if ntasks < 0:
            entries = record.jobspec.get("tasks")
            counts = entries[0].get("count", {}) if entries else {}
            first = record.jobspec.get("resources", [{}])[0]
            ntasks = int(counts.get("total", 0)) or _slots(first)
        info = job_info(record, nodelist, ntasks, requested_nodes=requested)
        note = self._burst_note(record)
        if note is not None:  # shown instead of the last reason a service (now gone) gave; never journaled
            info["annotations"]["sched"] = {**(info["annotations"].get("sched") or {}), "reason_pending": note}
        return info

    def _burst_note(self, record: JobRecord) -> str | None:
        """Why a burstable job too big for the instance waits when no burst service is running to say more."""
        if record.state != JobState.SCHED or not record.jobspec.get("attributes", {}).get("system", {}).get(
            "burstable"
        ):
            return None
        note = pending_note(self._burst_view())
        if note is None or self._queue.sched.unsatisfiable(self._table.spec(record).resources) is None:
            return None
        return note

    def svc_list(self, req: Request) -> None:
        """Jobs newest first within pending (by priority), running, then inactive; answered as JSON assembled
        from each job's encoded view (kept between listings: issue 27's listing of 5,000 jobs).

        `view` "restful" lists the REST API's detailed records instead (broker/jobs/rest_records.py), which the
        REST server passes on undecoded; `keyed` gives them as an object keyed by id, as GET /v1/jobs?details
        does; `owner` ({"name", "uid"}) keeps one tenant's jobs among those, by the access rule (jobs/info.owned_by)."""
        table = self._table
        mask = req.get("states", int, required=False, default=int(ACTIVE | JobState.INACTIVE))
        count = req.get("max_entries", int, required=False, default=0)
        userid = req.get("userid", int, required=False, default=-1)
        ids = req.get("ids", list, required=False, default=None)
        kind = req.get("view", str, required=False, default="job-list")
        keyed = req.get("keyed", bool, required=False, default=False)
        render = RENDERERS.get(kind)
        if render is None:
            raise ServiceError(EINVAL, f"'view' must be job-list or restful, not {kind!r}")
        self._warmer.listed(kind)
        owner = _owner_filter(req.get("owner", dict, required=False, default=None))
        records = [table[i] for i in ids if i in table] if ids is not None else list(table.records())
        active, inactive = int(ACTIVE), int(JobState.INACTIVE)
        pending: list[JobRecord] = []
        running: list[JobRecord] = []
        done: list[JobRecord] = []
        for r in records:
            state = r.state.value
            if not state & mask or (userid >= 0 and r.userid != userid):
                continue
            if state & active:
                (running if r.t_run else pending).append(r)
            elif state == inactive:
                done.append(r)
        pending.sort(key=lambda r: (-r.priority, r.jobid))
        running.sort(key=lambda r: -r.t_run)
        done.sort(key=lambda r: -r.t_inactive)
        ordered = [*pending, *running, *done]
        if count > 0:
            ordered = ordered[:count]
        if owner is not None:  # after the count: a tenant sees their jobs among the newest, as the REST API lists
            ordered = [r for r in ordered if owned_by(job_owner(r.jobspec), r.userid, *owner)]

        def encode(record: JobRecord) -> str:
            return render(self.info(record))

        views = [table.encoded_view(r, kind, encode, keep=self._changes_only_with_events(r)) for r in ordered]
        if keyed:
            members = ",".join(f'"{r.jobid}":{view}' for r, view in zip(ordered, views, strict=True))
            req.respond_encoded('{"jobs":{' + members + "}}")
        else:
            req.respond_encoded('{"jobs":[' + ",".join(views) + "]}")

    def render_ahead(self, jobid: int, kinds: frozenset[str]) -> None:
        """The job's views of these kinds, kept by the table before a listing asks (warmer.py says when)."""
        record = self._table.get(jobid)
        if record is None or not self._changes_only_with_events(record):
            return  # gone, or a view that is made at each listing anyway (a running job's)
        info: JobInfoRecord | None = None

        def rendered(kind: str) -> Callable[[JobRecord], str]:
            def render(record: JobRecord) -> str:
                nonlocal info
                info = self.info(record) if info is None else info  # one job-list view for every kind
                return RENDERERS[kind](info)

            return render

        for kind in kinds:
            self._table.encoded_view(record, kind, rendered(kind), keep=True)

    def _changes_only_with_events(self, record: JobRecord) -> bool:
        """Whether the job's view changes only with its events: not a running job's (its runtime grows) nor a
        pending burstable job's while a note says why it waits (the burst service's view changes it)."""
        return record.state != JobState.RUN and self._burst_note(record) is None

    def svc_info(self, req: Request) -> JobInfoRecord | JobInfoWithSpec:
        record = self._table.record(req)
        info = self.info(record)
        if req.payload.get("jobspec"):
            return {**info, "jobspec": record.jobspec}
        return info

    def svc_stats(self, req: Request) -> JobStats:
        counts = {str(state.name).lower(): 0 for state in JobState}
        for record in self._table.records():
            counts[str(record.state.name).lower()] += 1
        return {
            "states": counts,
            "queue_length": len(self._queue.pending()),
            "running": self._executions.count(),
            # listing views kept by kind, and jobs whose views wait to be rendered ahead (warmer.py)
            "views": {"kept": self._table.views_kept(), "to_render": self._warmer.pending},
        }

    def svc_history(self, req: Request) -> HistoryReply:
        """flux-core's job-manager.history.get: the user's job ids, newest first, sliced by `slice`."""
        try:
            wanted = parse_slice(req.get("slice", str, required=False, default="[:1]"))
        except SliceError as exc:
            raise ServiceError(EINVAL, str(exc)) from None
        userid = req.get("userid", int)
        ids = [r.jobid for r in self._table.records() if r.userid == userid]
        ids.sort(reverse=True)  # FLUIDs grow with submission time
        return {"jobs": ids[wanted]}

    def svc_annotate(self, req: Request) -> Empty:
        record = self._table.record(req)
        self._table.post(record, "annotate", req.get("annotations", dict))
        return {}


def _owner_filter(owner: object) -> tuple[str, int] | None:
    """job-manager.list's `owner`: (name, uid), or ServiceError naming the field."""
    if owner is None:
        return None
    name, uid = (owner.get("name"), owner.get("uid", -1)) if isinstance(owner, dict) else (None, None)
    if not isinstance(name, str) or not name or not isinstance(uid, int) or isinstance(uid, bool):
        raise ServiceError(EINVAL, 'job-manager.list: \'owner\' must be {"name": a user name, "uid": an integer}')
    return name, uid


def _slots(resource: ResourceVertex) -> int:
    count = resource.get("count", 1)
    count = count if isinstance(count, int) else 1
    if resource.get("type") == "node":
        nothing: list[ResourceVertex] = [{}]
        inner = resource.get("with", nothing)[0]
        return count * _slots(inner)
    return count
