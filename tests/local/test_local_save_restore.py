"""Acceptance of save and restore on real local pods with real brokers: 100 jobs (done, running with each save
policy, pending, and three that need 3 nodes) survive save -> down -> up at 2 pods -> restore, and again back
to 3 pods, with 0 lost and 0 duplicated, checked id by id and output by output, through `flux` in the lead pod
and through the REST API (spec.restful)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.rest.client import RestClient
from tests.waiting import holds_for

pytestmark = pytest.mark.needs_root

CREDENTIALS = {"FLUX_USER": "admin", "FLUX_TOKEN": "save-restore"}
NAME = "keep"
Run = Callable[..., subprocess.CompletedProcess[str]]

# In the lead pod: 5 done, 4 running (finish, requeue x2, checkpoint), queue stopped, 88 pending, 3 needing 3 nodes.
SUBMIT = """set -e
ids={work}/ids
for i in 1 2 3 4 5; do echo "done-$i $(flux submit echo done-$i)" >> $ids; done
flux queue idle
echo "finish $(flux submit --setattr=save-policy=finish \
  sh -c 'while [ ! -e {work}/gate ]; do sleep 0.1; done; echo finished')" >> $ids
for r in 1 2; do
  echo "requeue-$r $(flux submit sh -c 'if [ -e {work}/ran-'$r' ]; then echo second-'$r'; else touch {work}/ran-'$r'; \
echo first-'$r'; sleep 300; fi')" >> $ids
done
echo "checkpoint $(flux submit --setattr=save-policy=checkpoint --setattr=checkpoint-signal=SIGUSR1 \
  sh -c 'if [ -e {work}/ckpt ]; then echo resumed-$(cat {work}/ckpt); exit 0; fi; \
trap "echo 42 > {work}/ckpt; exit 0" USR1; echo working; while true; do sleep 0.1; done')" >> $ids
while [ ! -e {work}/ran-1 ] || [ ! -e {work}/ran-2 ]; do sleep 0.1; done
flux queue stop
for i in $(seq 1 88); do echo "pending-$i $(flux submit echo pending-$i)" >> $ids; done
for w in 1 2 3; do echo "wide-$w $(flux submit -N3 -n3 hostname)" >> $ids; done
"""

# In the lead pod: every job as the job manager sees it, with its output.
DUMP = """import json, sys
from broker.jobs.api import JobClient
with JobClient() as client:
    jobs = client.jobs("all")
    print(json.dumps([
        {"id": j.id, "state": j.state, "result": j.result, "note": j.exception_note,
         "reason": (j.annotations.get("sched") or {}).get("reason_pending", ""),
         "out": client.output_text(j.id) if j.state == "INACTIVE" else ""}
        for j in jobs
    ]))
"""


def _spec(directory: Path, size: int) -> Path:
    data = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": NAME},
        "spec": {"size": size, "interactive": True, "restful": {"enabled": True}, "containers": [{"image": "local"}]},
    }
    path = directory / f"{NAME}-{size}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _up(mc: Run, spec: Path, *extra: str) -> str:
    up = mc("up", str(spec), "--detach", *extra, env=CREDENTIALS, timeout=120)
    assert up.returncode == 0, up.stdout + up.stderr
    found = re.search(r"REST API:\s+(http://[0-9.]+:5000)", up.stdout)
    assert found, up.stdout
    return found[1]


def _dump(mc: Run, work: Path) -> dict[int, dict[str, Any]]:
    script = work / "dump.py"
    script.write_text(DUMP)
    result = mc("exec", NAME, "--", sys.executable, str(script), timeout=120)
    assert result.returncode == 0, result.stderr
    jobs = json.loads(result.stdout)
    ids = [j["id"] for j in jobs]
    assert len(ids) == len(set(ids)), "a job is listed twice"
    return {j["id"]: j for j in jobs}


def _rest(url: str) -> dict[int, dict[str, Any]]:
    with RestClient(url, user=CREDENTIALS["FLUX_USER"], token=CREDENTIALS["FLUX_TOKEN"]) as client:
        records = client.jobs()
        ids = [int(r["id"]) for r in records]
        assert len(ids) == len(set(ids)), "the REST API lists a job twice"
        return {int(r["id"]): {**r, "out": client.output(r["id"]) if r["state"] == "INACTIVE" else []} for r in records}


def _wait_settled(mc: Run, work: Path, active: int, waiter: Callable[..., Any]) -> dict[int, dict[str, Any]]:
    seen: dict[str, dict[int, dict[str, Any]]] = {}

    def settled() -> bool:
        seen["jobs"] = _dump(mc, work)
        return sum(1 for j in seen["jobs"].values() if j["state"] != "INACTIVE") == active

    waiter(settled, timeout=120, interval=1.0)
    return seen["jobs"]


def test_100_jobs_survive_save_down_up_at_another_size_and_back(
    tmp_path: Path, mc: Run, waiter: Callable[..., Any], minicluster_bin: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    big, small = _spec(tmp_path, 3), _spec(tmp_path, 2)
    first, second = tmp_path / "queue-1.tar.gz", tmp_path / "queue-2.tar.gz"

    # 1. Three pods: the queue as users leave it.
    url = _up(mc, big)
    try:
        (work / "submit.sh").write_text(SUBMIT.format(work=work))
        submitted = mc("exec", NAME, "--", "sh", str(work / "submit.sh"), timeout=180)
        assert submitted.returncode == 0, submitted.stderr
        kinds = dict(line.split() for line in (work / "ids").read_text().splitlines())
        by_id = {_as_int(jobid): kind for kind, jobid in kinds.items()}
        assert len(by_id) == 100
        before = _dump(mc, work)
        assert set(before) == set(by_id)
        running = {by_id[i]: j for i, j in before.items() if j["state"] != "SCHED"}
        assert {k: j["state"] for k, j in running.items() if not k.startswith("done-")} == dict.fromkeys(
            ("finish", "requeue-1", "requeue-2", "checkpoint"), "RUN"
        ), running
        # The save waits for the job whose policy is `finish`; the others are requeued or checkpointed now.
        saving = subprocess.Popen(
            [minicluster_bin, "save", NAME, str(first)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        waiter(lambda: (work / "ckpt").exists(), timeout=30)
        holds_for("the save waits for the finishing job", lambda: saving.poll() is None, 1.0)
        (work / "gate").touch()
        out, err = saving.communicate(timeout=120)
        assert saving.returncode == 0, err
        saved = subprocess.CompletedProcess(saving.args, 0, out, err)
        assert "100 jobs (94 to run after the restore, 3 of them requeued by the save, 6 done)" in saved.stdout
        rest_saved = _rest(url)
        assert set(rest_saved) == set(by_id)  # the REST API saw the same queue
    finally:
        assert mc("down", NAME).returncode == 0
    assert (work / "ckpt").read_text() == "42\n"  # the checkpoint job wrote its state on its signal
    with tarfile.open(first) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
    assert manifest["source"]["cluster"] == NAME and {j["id"] for j in manifest["jobs"]} == set(by_id)

    # A damaged copy is refused before anything is created.
    damaged = tmp_path / "damaged.tar.gz"
    damaged.write_bytes(first.read_bytes()[:-200])
    refused = mc("up", str(small), "--detach", "--restore", str(damaged), env=CREDENTIALS)
    assert refused.returncode == 2 and "truncated" in refused.stderr, refused.stderr
    assert "keep" not in mc("list").stdout

    # 2. Two pods: everything that fits runs once; the 3-node jobs wait, saying why.
    url = _up(mc, small, "--restore", str(first), "--restore-unfit", "wait")
    try:
        after = _wait_settled(mc, work, active=3, waiter=waiter)
        assert set(after) == set(by_id)  # 0 lost, 0 added
        for jobid, job in after.items():
            kind = by_id[jobid]
            if kind.startswith("wide-"):
                assert job["state"] == "SCHED" and "requested 3 nodes but the instance has at most 2" in job["reason"]
            else:
                assert (job["state"], job["result"]) == ("INACTIVE", "COMPLETED"), (kind, job)
                assert job["out"] == _expected(kind), (kind, job["out"])  # once: no output twice
        rest = _rest(url)
        assert set(rest) == set(by_id)
        assert {i: (r["state"], r["result"]) for i, r in rest.items()} == {
            i: (j["state"], j["result"]) for i, j in after.items()
        }
        for jobid, record in rest.items():
            if record["state"] == "INACTIVE":
                assert "".join(record["out"]) == after[jobid]["out"]
        saved = mc("save", NAME, str(second), timeout=120)
        assert saved.returncode == 0, saved.stderr
        assert "100 jobs (3 to run after the restore, 0 of them requeued by the save, 97 done)" in saved.stdout
    finally:
        assert mc("down", NAME).returncode == 0

    # 3. Back to three pods: the waiting jobs run, on all three.
    url = _up(mc, big, "--restore", str(second))
    try:
        final = _wait_settled(mc, work, active=0, waiter=waiter)
        assert set(final) == set(by_id)
        for jobid, job in final.items():
            kind = by_id[jobid]
            assert job["result"] == "COMPLETED", (kind, job)
            assert sorted(job["out"].splitlines()) == sorted(_expected(kind).splitlines()), (kind, job["out"])
            if kind.startswith("wide-"):
                assert job["reason"] == ""  # the smaller cluster's reason went when it fit
            else:
                assert job == after[jobid]  # untouched by the second restore
        assert {i: r["result"] for i, r in _rest(url).items()} == {i: "COMPLETED" for i in by_id}
    finally:
        assert mc("down", NAME).returncode == 0


def _as_int(jobid: str) -> int:
    from broker.jobs.jobid import parse_jobid

    return parse_jobid(jobid)


def _expected(kind: str) -> str:
    if kind.startswith("wide-"):
        return "".join(f"{NAME}-{i}\n" for i in range(3))  # one line per pod, in any order
    return {
        "finish": "finished\n",
        "requeue-1": "second-1\n",
        "requeue-2": "second-2\n",
        "checkpoint": "resumed-42\n",
    }.get(kind, f"{kind}\n")
