"""End to end: spec.restful on the local backend — the lead pod serves the REST API (both flavours, the `flux` one
on real flux-core), and the `minicluster jobs/submit/logs/cancel --url` commands drive it from the host."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.needs_root

CREDENTIALS = {"FLUX_USER": "admin", "FLUX_TOKEN": "e2e-password"}


@pytest.mark.parametrize("flavour", ["builtin", "flux"])
def test_rest_api_from_spec_to_host(
    tmp_path: Path, mc: Callable[..., subprocess.CompletedProcess[str]], flavour: str, request: pytest.FixtureRequest
) -> None:
    """Built-in: the lead broker serves it; flux: the lead pod serves it beside real flux-core, over its bindings."""
    if flavour == "flux":
        request.getfixturevalue("flux_core")
    spec = {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "metadata": {"name": "rest"},
        "spec": {"size": 2, "interactive": True, "restful": {"enabled": True}, "containers": [{"image": "local"}]},
    }
    path = tmp_path / "rest.yaml"
    path.write_text(yaml.safe_dump(spec))
    up = mc("up", str(path), "--detach", "--flavour", flavour, env=CREDENTIALS)
    assert up.returncode == 0, up.stderr
    found = re.search(r"REST API:\s+(http://[0-9.]+:5000)", up.stdout)
    assert found, up.stdout + up.stderr
    url = found[1]
    try:
        run = mc("submit", "--url", url, "-N", "2", "-n", "2", "--watch", "--", "hostname", env=CREDENTIALS)
        assert run.returncode == 0, run.stderr
        assert sorted(run.stdout.split()[1:]) == ["rest-0", "rest-1"]  # each pod's own hostname
        failing = mc("submit", "--url", url, "--watch", "--", "sh", "-c", "exit 7", env=CREDENTIALS)
        assert failing.returncode == 7
        sleeper = mc("submit", "--url", url, "--", "sleep", "60", env=CREDENTIALS).stdout.strip()
        assert "cancel" in mc("cancel", "--url", url, sleeper, env=CREDENTIALS).stdout.lower()
        echo = mc("submit", "--url", url, "--watch", "--", "echo", "via-rest", env=CREDENTIALS)
        jobid = echo.stdout.split()[0]
        assert mc("logs", jobid, "--url", url, env=CREDENTIALS).stdout.strip() == "via-rest"
        listing = mc("jobs", "--url", url, "-a", env=CREDENTIALS).stdout
        assert sleeper in listing and "CANCELED" in listing and "COMPLETED" in listing
        refused = mc("jobs", "--url", url, env={**CREDENTIALS, "FLUX_TOKEN": "wrong"})
        assert refused.returncode != 0 and "incorrect user or password" in refused.stderr
    finally:
        assert mc("down", "rest").returncode == 0
