"""Where a local campaign keeps its state and lock: read by `minicluster status` on every call, so it imports
nothing of the runner, the figures or the spec models."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

from common import atomic
from miniclusters import pidlock
from miniclusters.workdirs import state_root

if TYPE_CHECKING:
    from miniclusters.api.campaign import CampaignJson


class MemberLine(TypedDict):
    """A member as status shows it while the campaign runs."""

    member: str
    state: str
    iterations: int | None
    mean_duty: float | None


class EnsembleLine(TypedDict):
    ensemble: str
    state: str
    pods: list[int]
    members: list[MemberLine]


class MemberRow(TypedDict):
    """results.MemberResult as JSON."""

    ensemble: str
    member: str
    parameter: str
    value: float
    state: str
    cl: float | None
    cd: float | None
    iterations: int | None
    makespan: float | None
    mean_duty: float | None
    reason: str


class EnsembleRow(TypedDict):
    """results.EnsembleResult as JSON."""

    ensemble: str
    state: str
    members: int
    members_ok: int
    pods: list[int]
    makespan: float | None
    mean_duty: float | None
    cpu_requested_mean_m: float | None
    cpu_requested_peak_m: int | None
    resizes: int
    restarts: int


class ClusterTotals(TypedDict):
    """The cluster's figures over the whole campaign."""

    cpu_seconds_requested: float
    resizes: int
    scale_events: int


class Report(TypedDict, total=False):
    """The results: the science and the operations, and the files written."""

    members: list[MemberRow]
    ensemble_rows: list[EnsembleRow]
    unused_scaled_pods: list[int]
    files: list[str]
    cpu_seconds_requested: float
    resizes: int
    scale_events: int


class LiveFields(TypedDict, total=False):
    """What status shows while the campaign runs."""

    running: bool
    t: float
    size: int | None
    requested_m: int
    cpu_seconds_requested: float
    resizes: int
    scale_events: int
    ensembles: list[EnsembleLine]


class LoopsUsed(TypedDict):
    autoscale: bool
    multiplex: bool


class CampaignState(Report, LiveFields, total=False):
    """`<state>/.campaign/<name>.json`: the campaign as it runs and, once it ended, its results."""

    cluster: str
    pid: int
    updated: float
    workdir: str
    events: str
    campaign: CampaignJson
    """spec.campaign as written (CampaignSpec validates it when read back)."""
    loops: LoopsUsed
    outcome: str
    stopped: str


def campaign_dir() -> Path:
    return state_root() / ".campaign"  # not a cluster name (names cannot start with a dot)


def lock_path(name: str) -> Path:
    return campaign_dir() / f"{name}.lock"


def state_path(name: str) -> Path:
    return campaign_dir() / f"{name}.json"


def exclusive(name: str) -> contextlib.AbstractContextManager[Path]:
    return pidlock.exclusive(lock_path(name), f"MiniCluster {name!r} already runs a campaign")


def stop(name: str, timeout: float = 60.0) -> int | None:
    """SIGTERM the process running the cluster's campaign (it cancels every ensemble, then tears down)."""
    return pidlock.stop_holder(lock_path(name), timeout)


def save_state(name: str, fields: CampaignState) -> None:
    path = state_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(
        path, json.dumps({"cluster": name, "pid": os.getpid(), "updated": time.time(), **fields}, indent=2, default=str)
    )


def load_state(name: str) -> CampaignState | None:
    try:
        data = json.loads(state_path(name).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    state = cast(CampaignState, data)  # the file as the runner wrote it
    if state.get("running") and pidlock.holder(lock_path(name)) is None:
        state["running"] = False
        state["stopped"] = "its process is gone"
    return state
