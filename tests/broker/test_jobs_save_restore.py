"""Saving a live queue and restoring it into an instance of another size, with real brokers: running jobs settle
by their save policy (finish, requeue, checkpoint on their signal), ids are kept, nothing runs twice, a job that
cannot fit the smaller instance is rejected with the reason, and a damaged archive stops the lead before it
changes anything."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from broker.jobs.api import JobClient
from broker.refused import EXIT_REFUSED, refusal_reason
from broker.testing import FLUX, Instance, kill_orphans, pack_archive, render_instance, run_flux, wait_for


def _start(inst: Instance, ranks: int, *extra: str) -> JobClient:
    for rank in range(ranks):
        inst.start(rank, "-Sresource.cores=0-1", "-Sjob-exec.kill-timeout=1s", *(extra if rank == 0 else ()))
    inst.wait_states({rank: "up" for rank in range(ranks)})
    return JobClient(inst.uri(0))


def test_save_settles_running_jobs_by_policy_and_restores_into_a_smaller_instance(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    archive = tmp_path / "saved" / "queue.tar.gz"
    (tmp_path / "old").mkdir()
    old = render_instance(tmp_path / "old", 2)
    try:
        with _start(old, 2, f"-Sstatedir={tmp_path / 'old-state'}") as client:
            done = client.submit(command=["echo", "before the save"])
            assert client.wait(done, timeout=20).success
            finish = client.submit(
                command=["sh", "-c", "sleep 1; echo finished in the old cluster"],
                system_attributes={"save-policy": "finish"},
            )
            requeue = client.submit(
                command=[
                    "sh",
                    "-c",
                    f"if [ -e {work}/ran ]; then echo second run; else touch {work}/ran; echo first run; sleep 60; fi",
                ],
            )
            checkpoint = client.submit(
                command=[
                    "sh",
                    "-c",
                    f"if [ -e {work}/ckpt ]; then echo resumed from $(cat {work}/ckpt); exit 0; fi; "
                    f'trap "echo step-7 > {work}/ckpt; echo checkpointed; exit 0" USR1; echo working; '
                    "while true; do sleep 0.1; done",
                ],
                system_attributes={"save-policy": "checkpoint", "checkpoint-signal": "SIGUSR1"},
            )
            for jobid in (finish, requeue, checkpoint):
                client.wait_state(jobid, "RUN")
            wait_for(lambda: "working" in client.output_text(checkpoint) and (work / "ran").exists())
            client.queue("stop")
            pending = [client.submit(command=["echo", f"pending {i}"]) for i in range(3)]
            wide = client.submit(command=["hostname"], nnodes=2, ntasks=2)  # fits 2 brokers only
            before = {info.id: info.state for info in client.jobs("all")}
            env = dict(os.environ, FLUX_URI=old.uri(0))
            missing = run_flux("queue", "save", str(archive), env=env)  # its directory is not made: an error
            assert missing.returncode != 0 and f"directory {archive.parent} does not exist" in missing.stderr
            assert not archive.parent.exists() and client.info(requeue).state == "RUN"  # untouched
            archive.parent.mkdir()
            archive.write_text("an earlier save")
            kept = run_flux("queue", "save", str(archive), env=env)
            assert kept.returncode != 0 and "exists: choose another path, or replace it with --force" in kept.stderr
            assert archive.read_text() == "an earlier save" and client.info(requeue).state == "RUN"  # untouched
            saved = run_flux("queue", "save", "--force", "--cluster=demo", str(archive), env=env, timeout=60)
            assert saved.returncode == 0, saved.stderr
            counts = json.loads(saved.stdout)
            assert counts == {**counts, "cluster": "demo", "jobs": 8, "requeued": 2, "inactive": 2, "pending": 6}
            assert client.info(finish).result == "COMPLETED"  # finished before the archive was written
            assert client.output_text(finish) == "finished in the old cluster\n"
            refused = run_flux("submit", "true", env=env)
            assert refused.returncode != 0 and "saving the queue" in refused.stderr
    finally:
        old.cleanup()
        kill_orphans(old.uri(0))
    assert (work / "ckpt").read_text() == "step-7\n"

    (tmp_path / "new").mkdir()
    new = render_instance(tmp_path / "new", 1)
    state = tmp_path / "new-state"
    try:
        restore = [f"-Sstatedir={state}", f"-Scontent.restore={archive}", "-Sjob-manager.restore-unfit=reject"]
        with _start(new, 1, *restore) as client:
            after = {info.id: info for info in client.jobs("all")}
            assert set(after) == set(before)  # every id kept, none added
            for jobid in [requeue, checkpoint, *pending]:
                assert client.wait(jobid, timeout=30).success
            assert client.output_text(done) == "before the save\n"
            assert client.output_text(finish) == "finished in the old cluster\n"
            assert client.output_text(requeue) == "second run\n"  # the interrupted run is not repeated in it
            assert client.output_text(checkpoint) == "resumed from step-7\n"
            assert [client.output_text(j) for j in pending] == [f"pending {i}\n" for i in range(3)]
            rejected = client.wait(wide, timeout=10)
            assert rejected.result == "FAILED" and "requested 2 nodes but the instance has at most 1" in (
                rejected.exception_note
            )
            assert client.info(requeue).t_run and client.info(done).state == "INACTIVE"
        # A restarted lead finds its restored queue in its journal, even with the archive gone.
        new.kill(0)
        new.procs[0].wait(timeout=10)
        archive.rename(archive.with_name("moved.tar.gz"))
        with _start(new, 1, *restore) as client:
            assert {info.id: info.state for info in client.jobs("all")} == dict.fromkeys(before, "INACTIVE")
            assert client.output_text(requeue) == "second run\n"
        archive.with_name("moved.tar.gz").rename(archive)
        attempts = sorted(p.name for p in (state / "output").glob("*.attempt-*.jsonl"))
        assert attempts == sorted([f"{requeue}.attempt-0.jsonl", f"{checkpoint}.attempt-0.jsonl"])
        first = (state / "output" / f"{checkpoint}.attempt-0.jsonl").read_text()
        assert "working" in first and "checkpointed" in first  # the signalled run's output, kept apart
    finally:
        new.cleanup()
        kill_orphans(new.uri(0))

    # The same archive with unfit=wait: the wide job stays pending, its reason shown by `flux jobs`.
    (tmp_path / "waiting").mkdir()
    waiting = render_instance(tmp_path / "waiting", 1)
    try:
        restore = [f"-Sstatedir={tmp_path / 'wait-state'}", f"-Scontent.restore={archive}"]
        with _start(waiting, 1, *restore) as client:
            for jobid in pending:
                assert client.wait(jobid, timeout=30).success
            assert client.info(wide).state == "SCHED"
            env = dict(os.environ, FLUX_URI=waiting.uri(0))
            shown = run_flux("jobs", "--format={id.dec} {annotations.sched.reason_pending}", env=env)
            line = next(x for x in shown.stdout.splitlines() if x.startswith(str(wide)))
            assert "does not fit this cluster after restore: requested 2 nodes but the instance has at most 1" in line
    finally:
        waiting.cleanup()
        kill_orphans(waiting.uri(0))


@pytest.mark.parametrize("case", ["damaged", "hostile"])
def test_a_damaged_or_hostile_archive_stops_the_lead_and_changes_nothing(tmp_path: Path, case: str) -> None:
    """The lead refuses to start, for good (exit EXIT_REFUSED, its reason on one marked line), before anything is
    written: a member climbing out of the state directory lands nowhere."""
    (tmp_path / "i").mkdir()
    inst = render_instance(tmp_path / "i", 1)
    archive = tmp_path / "queue.tar.gz"
    if case == "damaged":
        archive.write_bytes(b"\x1f\x8b" + b"garbage" * 10)
    else:
        pack_archive(archive, [("output/../../escaped.jsonl", tarfile.REGTYPE, b"owned\n", "")])
    state = tmp_path / "deep" / "state"
    try:
        proc = inst.start(0, f"-Sstatedir={state}", f"-Scontent.restore={archive}")
        assert proc.wait(timeout=20) == EXIT_REFUSED
        assert proc.stderr is not None
        reason = refusal_reason(proc.stderr.read())
        assert reason is not None and reason.startswith(f"content.restore: {archive}: "), reason
        if case == "damaged":
            assert "truncated" in reason or "not a readable tar archive" in reason, reason
        else:
            assert reason.endswith("archive member 'output/../../escaped.jsonl' climbs out of its directory")
        assert not (state / "journal.jsonl").exists()
        assert not list(tmp_path.rglob("escaped.jsonl"))
    finally:
        inst.cleanup()


def test_a_save_cut_short_by_a_lead_restart_leaves_the_queue_running(tmp_path: Path) -> None:
    (tmp_path / "i").mkdir()
    inst = render_instance(tmp_path / "i", 1)
    state = tmp_path / "state"
    try:
        with _start(inst, 1, f"-Sstatedir={state}") as client:
            stuck = client.submit(command=["sleep", "300"], system_attributes={"save-policy": "finish"})
            client.wait_state(stuck, "RUN")
            env = dict(os.environ, FLUX_URI=inst.uri(0))
            saving = subprocess.Popen(
                [FLUX, "queue", "save", str(tmp_path / "never.tar.gz")], env=env, stderr=subprocess.PIPE, text=True
            )
            wait_for(lambda: not client.queue("status")["started"])
            assert client.queue("status")["stop_reason"] == "saving the queue"
        inst.kill(0)
        inst.procs[0].wait(timeout=10)
        _, err = saving.communicate(timeout=60)
        assert saving.returncode != 0 and err  # the client is told, never left hanging
        kill_orphans(inst.uri(0))
        with _start(inst, 1, f"-Sstatedir={state}") as client:
            status = client.queue("status")
            assert status["started"] and status["enabled"]
            assert client.info(stuck).state == "INACTIVE"  # the lead's restart policy settled it, with a reason
            assert not (tmp_path / "never.tar.gz").exists()
    finally:
        inst.cleanup()
        kill_orphans(inst.uri(0))


def test_jobs_that_overstay_are_requeued_at_their_timeouts(tmp_path: Path) -> None:
    (tmp_path / "i").mkdir()
    inst = render_instance(tmp_path / "i", 1)
    archive = tmp_path / "queue.tar.gz"
    try:
        with _start(inst, 1, f"-Sstatedir={tmp_path / 'state'}") as client:
            stubborn = client.submit(
                command=["sh", "-c", 'trap "" USR1; while true; do sleep 0.1; done'],
                system_attributes={"save-policy": "checkpoint", "checkpoint-timeout": "1s"},
            )
            endless = client.submit(command=["sleep", "300"], system_attributes={"save-policy": "finish"})
            for jobid in (stubborn, endless):
                client.wait_state(jobid, "RUN")
            env = dict(os.environ, FLUX_URI=inst.uri(0))
            saved = run_flux("queue", "save", "--timeout=3s", str(archive), env=env, timeout=60)
            assert saved.returncode == 0, saved.stderr
            assert json.loads(saved.stdout)["requeued"] == 2
            notes = {
                jobid: [e["context"].get("note") for e in client.events(jobid, follow=False) if e["name"] == "requeue"]
                for jobid in (stubborn, endless)
            }
            assert notes == {
                stubborn: ["did not exit after its checkpoint signal: requeued by a save"],
                endless: ["still running when the save timed out: requeued"],
            }
    finally:
        inst.cleanup()
        kill_orphans(inst.uri(0))
