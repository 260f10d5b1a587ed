"""The autoscaler's view of a real lead broker: its queue in ranks, and draining ranks before a scale-down."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from broker.errors import FluxError
from broker.jobs.api import JobClient
from broker.testing import kill_orphans, render_instance, run_flux, wait_for
from tests.waiting import holds_for


def test_drained_ranks_take_no_new_jobs_and_running_ones_finish(tmp_path: Path) -> None:
    inst = render_instance(tmp_path, 2)
    try:
        inst.start(0, "-Sbroker.quorum=2", "-Sresource.cores=0", "-Sjob-exec.kill-timeout=1s")
        inst.start(1, "-Sresource.cores=0")
        inst.handle(0).close()
        with JobClient(inst.uri(0)) as client:
            handle = client.handle
            long = client.submit(command=["sleep", "2"], nnodes=2, ntasks=2)
            client.wait_state(long, "RUN")
            state = handle.rpc("job-manager.queue-state", {})
            assert state["running"] == [{"id": long, "ranks": [0, 1], "cores": {"0": 1, "1": 1}}]
            assert state["pending"] == []
            # Drain rank 1 while the 2-node job runs on it: the job keeps running and finishes.
            answer = handle.rpc("job-manager.drain", {"ranks": [1]})
            assert answer == {"drained": [1], "busy": [1]}
            one = client.submit(command=["true"], nnodes=1, ntasks=1)
            two = client.submit(command=["true"], nnodes=2, ntasks=2)
            assert client.wait(long, timeout=30).success
            assert client.wait(one, timeout=30).success
            assert client.info(one).nodelist == "node0"  # rank 0 only: rank 1 is drained
            # undrained, `two` would have started the moment `one` ended
            holds_for("`two` waits for rank 1", lambda: client.info(two).state == "SCHED", 0.5)
            pending = handle.rpc("job-manager.queue-state", {})["pending"]
            assert [(p["id"], p["nnodes"]) for p in pending] == [(two, 2)]  # waits for rank 1
            handle.rpc("job-manager.drain", {"ranks": []})
            assert client.wait(two, timeout=30).success
            with pytest.raises(FluxError, match=r"rank 0 \(the lead\) is never drained"):
                handle.rpc("job-manager.drain", {"ranks": [0]})
            with pytest.raises(FluxError, match="no such rank 7"):
                handle.rpc("job-manager.drain", {"ranks": [7]})
    finally:
        inst.cleanup()
        kill_orphans(inst.uri(0))


def _flux(inst, *args: str) -> subprocess.CompletedProcess[str]:
    return run_flux(*args, env={**os.environ, "FLUX_URI": inst.uri(0)}, timeout=30)


def _rows(listing: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in listing.splitlines()[1:] if line.split()}


def test_drains_keep_their_reason_are_never_free_and_pending_jobs_say_why(tmp_path: Path) -> None:
    """flux-core's drain semantics: a reason per rank, `drain` lists them, a drained rank is not free, a job
    waiting for drained ranks says so; a controller's `--set` changes only the ranks drained with its reason."""
    inst = render_instance(tmp_path, 3)
    try:
        inst.start(0, "-Sbroker.quorum=3", "-Sresource.cores=0")
        inst.start(1, "-Sresource.cores=0")
        inst.start(2, "-Sresource.cores=0")
        inst.handle(0).close()
        assert _flux(inst, "resource", "drain", "2", "disk", "check").returncode == 0  # an operator's drain
        mine = _flux(inst, "resource", "drain", "--set", "1-2", "autoscaler: scale-down")
        assert mine.returncode == 0, mine.stderr
        assert json.loads(mine.stdout)["drained"] == [1, 2]
        listing = _flux(inst, "resource", "drain").stdout
        lines = {line.split()[2]: line for line in listing.splitlines()[1:]}
        assert "drained" in lines["1"] and "autoscaler: scale-down" in lines["1"] and "node1" in lines["1"]
        assert "disk check" in lines["2"] and "autoscaler" not in lines["2"], listing  # --set kept its reason
        rows = _rows(_flux(inst, "resource", "list").stdout)
        assert rows["free"][:2] == ["1", "1"] and rows["drained"][:2] == ["2", "2"], rows
        assert rows["drained"][3] == "node[1-2]"
        # a drained rank is refused unless --force or --update; nothing changes
        again = _flux(inst, "resource", "drain", "1", "other")
        assert again.returncode != 0 and "rank 1 is already drained" in again.stderr
        with JobClient(inst.uri(0)) as client:
            waiting = client.submit(command=["true"], nnodes=2, ntasks=2)
            info = _flux(inst, "jobs", "--no-header", "-o", "{id.f58} {contextual_info}").stdout
            assert wait_for(
                lambda: (
                    "waiting for drained ranks 1 (autoscaler: scale-down), 2 (disk check)"
                    in _flux(inst, "jobs", "--no-header", "-o", "{contextual_info}").stdout
                ),
                10,
                0.3,
            ), info
            # the controller lets go of its own ranks only: the operator's rank 2 stays drained
            assert _flux(inst, "resource", "drain", "--set", "", "autoscaler: scale-down").returncode == 0
            state = client.handle.rpc("job-manager.queue-state", {})
            assert state["drained"] == [2] and state["drain"]["2"]["reason"] == "disk check"
            assert client.wait(waiting, timeout=30).success  # ranks 0-1 now
            assert client.info(waiting).annotations.get("sched", {}).get("reason_pending") == ""
        missing = _flux(inst, "resource", "undrain", "1")
        assert missing.returncode != 0 and "rank 1 is not drained" in missing.stderr
        assert _flux(inst, "resource", "undrain", "2").returncode == 0
        assert "drained" not in _rows(_flux(inst, "resource", "list").stdout)
    finally:
        inst.cleanup()
        kill_orphans(inst.uri(0))
