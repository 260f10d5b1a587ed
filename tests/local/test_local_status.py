"""`minicluster status` of real local clusters reads like kubectl and its text agrees with its JSON; `up` of a
cluster that exists says how to reach it (and changes nothing when the spec differs)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from miniclusters.backends.local.backend import LocalBackend
from miniclusters.testing.status_text import disagreements, parse_status_text

pytestmark = pytest.mark.needs_root


def _spec(directory: Path, name: str, **spec: Any) -> Path:
    body: dict[str, Any] = {"size": 2, "containers": [{"image": "local"}], **spec}
    data = {"apiVersion": "miniclusters.dev/v1alpha1", "kind": "MiniCluster", "metadata": {"name": name}, "spec": body}
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _both(mc: Any, name: str) -> tuple[str, dict[str, Any]]:
    text, document = mc("status", name), mc("status", name, "-o", "json")
    assert text.returncode == 0 and document.returncode == 0, text.stderr + document.stderr
    return text.stdout, json.loads(document.stdout)


def test_running_cluster_status_and_up_again(mc: Any, machine: Any, backend: LocalBackend) -> None:
    spec = _spec(machine.state_dir, "st", interactive=True, restful={"enabled": True, "port": 5000})
    up = mc("up", str(spec), "--detach")
    assert up.returncode == 0, up.stderr
    strays = [line for line in up.stderr.splitlines() if line and not line.startswith(("[", "notice:", "REST API"))]
    assert not strays, f"progress lines wrapped mid-sentence: {strays}"
    text, document = _both(mc, "st")
    assert disagreements(text, document) == [], text
    lead = backend.store.load("st").pods[0]
    assert document["rest_url"] == f"http://{lead.address}:5000"
    assert parse_status_text(text)["header"]["REST API"] == document["rest_url"]
    assert document["min_size"] == 1 and document["state"] == "Running" and document["ranks"] == "0-1 up"
    isolation = next(c for c in document["conditions"] if c["type"] == "Isolation")
    assert isolation["reason"] == "Namespaces" and "network namespace" in isolation["message"]
    queue = next(c for c in document["conditions"] if c["type"] == "Queue")
    assert (queue["reason"], queue["message"]) == ("Idle", "no jobs")
    assert [p["cpu_actual"] for p in document["pods"]] == [None, None]  # no request: nothing invented
    assert [p["READY"] for p in parse_status_text(text)["pods"]] == ["1/1", "1/1"]

    # exec runs where the pods run (the directory of `up`), not at / (nsenter's default in a mount namespace)
    where = mc("exec", "st", "-i", "1", "--", "pwd")
    assert where.returncode == 0 and where.stdout.strip() == os.getcwd(), where.stdout + where.stderr
    pids = {i: p.pid for i, p in backend.store.load("st").pods.items()}
    again = mc("up", str(spec), "--detach")
    assert again.returncode == 0, again.stderr
    for words in ("minicluster status st", "minicluster exec st --", "minicluster down st", document["rest_url"]):
        assert words in again.stdout, again.stdout
    bigger = _spec(machine.state_dir, "st", size=3, interactive=True, restful={"enabled": True, "port": 5000})
    changed = mc("up", str(bigger), "--detach")
    assert changed.returncode == 2 and "spec.size: 2 -> 3" in changed.stderr, changed.stderr
    assert "minicluster scale st" in changed.stderr and "minicluster status st" in changed.stderr
    assert {i: p.pid for i, p in backend.store.load("st").pods.items()} == pids  # nothing changed


def test_a_finished_run_reads_completed(mc: Any, machine: Any) -> None:
    spec = _spec(machine.state_dir, "done", containers=[{"image": "local", "command": "true"}])
    run = mc("up", str(spec), "--keep")
    assert run.returncode == 0, run.stderr
    text, document = _both(mc, "done")
    assert disagreements(text, document) == [], text
    assert document["state"] == "Completed" and "unknown" not in text
    assert [p["status"] for p in document["pods"]] == ["Completed", "Completed"]
    again = mc("up", str(spec))
    assert again.returncode == 1 and "has finished" in again.stderr and "minicluster down done" in again.stderr
