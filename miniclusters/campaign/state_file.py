"""Where a local campaign keeps its state and lock: read by `minicluster status` on every call, so it imports
nothing of the runner, the figures or the spec models."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from common import atomic
from miniclusters import pidlock
from miniclusters.workdirs import state_root


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


def save_state(name: str, fields: dict[str, Any]) -> None:
    path = state_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(
        path, json.dumps({"cluster": name, "pid": os.getpid(), "updated": time.time(), **fields}, indent=2, default=str)
    )


def load_state(name: str) -> dict[str, Any] | None:
    try:
        data = json.loads(state_path(name).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("running") and pidlock.holder(lock_path(name)) is None:
        data.update(running=False, stopped="its process is gone")
    return data
