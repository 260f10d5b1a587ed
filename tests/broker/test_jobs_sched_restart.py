"""Queue policies on a crafted queue (FCFS vs EASY backfill) and a lead restart that loses no job."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from broker.jobs.api import JobClient
from broker.testing import Instance, kill_orphans, render_instance, run_flux, wait_for


def _start(inst: Instance, *extra: str) -> JobClient:
    inst.start(0, "-Sresource.cores=0-1", "-Sjob-exec.kill-timeout=1s", *extra)
    inst.handle(0).close()
    return JobClient(inst.uri(0))


def _crafted_queue(client: JobClient) -> dict[str, int]:
    """A runs on one core; B needs both (blocked); C is short enough to backfill; D has no time limit."""
    client.queue("stop")
    jobs = {
        "A": client.submit(command=["sleep", "1"], duration=4),
        "B": client.submit(command=["true"], ntasks=2, duration=4),
        "C": client.submit(command=["true"], duration=1),
        "D": client.submit(command=["true"]),
    }
    client.queue("start")
    for jobid in jobs.values():
        assert client.wait(jobid, timeout=30).success
    return {name: client.info(jobid).t_run for name, jobid in jobs.items()}  # type: ignore[misc]


def test_fcfs_and_easy_backfill_order(tmp_path: Path) -> None:
    inst = render_instance(tmp_path, 1)
    try:
        with _start(inst) as client:
            fcfs = _crafted_queue(client)
            assert fcfs["A"] < fcfs["B"] <= fcfs["C"] <= fcfs["D"]  # strict order: nothing jumps B
            assert client.queue("policy", "easy")["policy"] == "easy"
            easy = _crafted_queue(client)
            assert easy["C"] < easy["B"]  # ends before B's reservation: backfilled
            assert easy["D"] >= easy["B"]  # would delay B: waits
            env = dict(os.environ, FLUX_URI=inst.uri(0))
            assert run_flux("queue", "policy", env=env).stdout.strip() == "easy"
    finally:
        inst.cleanup()
        kill_orphans(inst.uri(0))


def test_lead_restart_loses_no_job(tmp_path: Path) -> None:
    inst = render_instance(tmp_path, 1)
    statedir = tmp_path / "state"
    try:
        with _start(inst, f"-Sstatedir={statedir}") as client:
            running = client.submit(command=["sleep", "30"])
            requeue = client.submit(command=["sleep", "30"], system_attributes={"requeue": True})
            client.wait_state(running, "RUN")
            client.wait_state(requeue, "RUN")
            client.queue("stop")
            pending = [client.submit(command=["echo", f"p{i}"]) for i in range(5)]
            before = {info.id for info in client.jobs("all")}
        inst.kill(0, signal.SIGKILL)
        inst.procs[0].wait(timeout=10)
        kill_orphans(inst.uri(0))  # the killed lead's tasks (a restarted pod would not have them)
        with _start(inst, f"-Sstatedir={statedir}") as client:
            after = {info.id: info for info in client.jobs("all")}
            assert before <= set(after)  # nothing accepted is lost
            lost = client.info(running)
            assert lost.state == "INACTIVE" and lost.result == "FAILED"
            assert "lead broker restarted" in lost.exception_note
            assert client.info(requeue).state == "SCHED"  # requeued by its job option
            assert all(after[j].state == "SCHED" for j in pending)  # still pending, queue state aside
            client.queue("start")
            for i, jobid in enumerate(pending):
                assert client.wait(jobid, timeout=20).success
                assert client.output_text(jobid) == f"p{i}\n"
            wait_for(lambda: client.info(requeue).state == "RUN")
            assert client.info(requeue).state == "RUN"
            client.cancel(requeue)
            assert client.wait(requeue, timeout=20).result == "CANCELED"
            fresh = client.submit(command=["true"])
            assert fresh > max(before)  # ids keep increasing across the restart
    finally:
        inst.cleanup()
        kill_orphans(inst.uri(0))


def _to_old_layout(statedir: Path) -> None:
    """Rewrite a state directory as the job manager wrote it before broker/jobs/store.py (epoch file,
    queue.json, output/<id>.json, instance records absent from the journal)."""
    journal = statedir / "journal.jsonl"
    kept = []
    for line in journal.read_text().splitlines():
        record = json.loads(line)
        if record["id"] == 0 and record["name"] == "epoch":
            (statedir / "epoch").write_text(f"{record['context']['ms']}\n")
        elif record["id"] == 0 and record["name"] == "queue":
            (statedir / "queue.json").write_text(json.dumps(record["context"]))
        else:
            kept.append(line + "\n")
    journal.write_text("".join(kept))
    for path in (statedir / "output").glob("*.jsonl"):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        path.with_suffix(".json").write_text(json.dumps(lines))
        path.unlink()


def test_a_state_directory_from_before_the_store_restores_every_job(tmp_path: Path) -> None:
    inst = render_instance(tmp_path, 1)
    statedir = tmp_path / "state"
    try:
        with _start(inst, f"-Sstatedir={statedir}") as client:
            done = client.submit(command=["echo", "kept"])
            assert client.wait(done, timeout=20).success
            client.queue("stop", "maintenance")
            pending = client.submit(command=["echo", "later"])
        inst.kill(0, signal.SIGTERM)
        inst.procs[0].wait(timeout=10)
        _to_old_layout(statedir)
        assert (statedir / "epoch").exists() and (statedir / "queue.json").exists()
        with _start(inst, f"-Sstatedir={statedir}") as client:
            assert client.output_text(done) == "kept\n"  # output saved in the old format is still there
            assert client.info(pending).state == "SCHED"
            assert client.queue("status")["started"] is False  # the stopped queue stayed stopped
            client.queue("start")
            assert client.wait(pending, timeout=20).success
            assert client.submit(command=["true"]) > pending  # the FLUID epoch was kept
        assert not (statedir / "epoch").exists() and not (statedir / "queue.json").exists()
    finally:
        inst.cleanup()
        kill_orphans(inst.uri(0))
