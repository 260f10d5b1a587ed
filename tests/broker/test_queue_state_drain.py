"""The autoscaler's view of a real lead broker: its queue in ranks, and draining ranks before a scale-down."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.errors import FluxError
from broker.jobs.api import JobClient
from broker.testing import kill_orphans, render_instance


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
            time.sleep(0.5)  # undrained, `two` would have started the moment `one` ended
            pending = handle.rpc("job-manager.queue-state", {})["pending"]
            assert [(p["id"], p["nnodes"]) for p in pending] == [(two, 2)]  # waits for rank 1
            assert client.info(two).state == "SCHED"
            handle.rpc("job-manager.drain", {"ranks": []})
            assert client.wait(two, timeout=30).success
            with pytest.raises(FluxError, match=r"rank 0 \(the lead\) is never drained"):
                handle.rpc("job-manager.drain", {"ranks": [0]})
            with pytest.raises(FluxError, match="no such rank 7"):
                handle.rpc("job-manager.drain", {"ranks": [7]})
    finally:
        inst.cleanup()
        kill_orphans(inst.uri(0))
