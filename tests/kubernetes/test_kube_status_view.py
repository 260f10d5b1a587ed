"""`minicluster status` on the Kubernetes backend: RESTARTS and the container's reason from the pod, the REST
Service URL, and text that says what the JSON says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from miniclusters import backends
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.cli import main
from miniclusters.testing.fake_kube import FakeKube
from miniclusters.testing.status_text import disagreements, parse_status_text


@pytest.fixture
def cli(fake: FakeKube, clock, monkeypatch) -> CliRunner:
    def factory(**options):
        options.pop("context", None)
        return KubernetesBackend(api=fake, clock=clock, sleep=clock.sleep, **options)

    monkeypatch.setitem(backends._REGISTRY, "kubernetes", factory)
    monkeypatch.setenv("MINICLUSTER_BACKEND", "kubernetes")
    return CliRunner()


def test_restarts_reason_and_rest_url_in_text_and_json(cli: CliRunner, fake: FakeKube, tmp_path: Path, spec_data):
    spec_data["spec"]["restful"] = {"enabled": True, "port": 5000}
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(spec_data))
    assert cli.invoke(main, ["up", str(path), "--detach"]).exit_code == 0
    fake.crash_container("demo", 1)
    fake.crash_container("demo", 1)

    document = json.loads(cli.invoke(main, ["status", "demo", "-o", "json"]).stdout)
    text = cli.invoke(main, ["status", "demo"]).stdout
    assert disagreements(text, document) == []
    pod = document["pods"][1]
    assert (pod["restarts"], pod["reason"], pod["ready"]) == (2, "CrashLoopBackOff", False)
    assert pod["status"] == "CrashLoopBackOff"
    assert document["rest_url"] == "http://demo-restful.hpc.svc:5000"
    parsed = parse_status_text(text)
    assert parsed["header"]["REST API"] == "http://demo-restful.hpc.svc:5000"
    assert [(p["RESTARTS"], p["STATUS"]) for p in parsed["pods"]] == [("0", "Running"), ("2", "CrashLoopBackOff")]
    assert parsed["header"]["Size"] == "2 pods (min 1, max 6)" and document["min_size"] == 1

    fake.finish_pod("demo", 0, exit_code=0)
    document = json.loads(cli.invoke(main, ["status", "demo", "-o", "json"]).stdout)
    text = cli.invoke(main, ["status", "demo"]).stdout
    assert disagreements(text, document) == []
    assert document["state"] == "Completed" and document["pods"][0]["status"] == "Completed"
    assert "unknown" not in text
