"""A lead with spec.flux.bursting.plugins: its pod gets the MiniCluster as JSON and starts the burst service beside
the broker (except on the local backend, which runs it beside the lead on the machine); a burst renders as
followers only, reaching the lead at leadBroker's address."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from miniclusters.api import load_minicluster, load_minicluster_file
from miniclusters.render.entrypoint import render_entrypoint
from miniclusters.render.job import build_volumes
from miniclusters.render.objects import build_config_map

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "burst.yaml"


def test_the_lead_pod_runs_the_burst_service_with_the_spec_and_certificate() -> None:
    mc = load_minicluster_file(EXAMPLE)
    data = build_config_map(mc, "hpc", "cluster.local")["data"]
    assert json.loads(data["minicluster.json"])["spec"]["flux"]["bursting"]["plugins"] == [{"name": "local", "size": 2}]
    scripts = next(v for v in build_volumes(mc) if v["name"] == "mc-scripts")
    assert {"key": "minicluster.json", "path": "minicluster.json"} in scripts["configMap"]["items"]
    script = render_entrypoint(mc)
    lead_branch = script.split('if [ "$index" = 0 ]; then', 1)[1].split("\nelse\n", 1)[0]
    assert '[ -z "${MINICLUSTERS_LOCAL_POD:-}" ]' in lead_branch
    assert "-m bursting.service --cluster burst" in lead_branch
    assert "--spec /etc/miniclusters/minicluster.json --certificate /etc/flux/curve/curve.cert --plugins local" in (
        lead_branch
    )
    plain = load_minicluster({**mc.to_dict(), "spec": {**mc.to_dict()["spec"], "flux": {}}})
    assert "bursting.service" not in render_entrypoint(plain)
    assert "minicluster.json" not in build_config_map(plain, "hpc", "cluster.local")["data"]


def test_a_burst_is_followers_only_and_reaches_the_lead_at_its_address() -> None:
    data = load_minicluster_file(EXAMPLE).to_dict()
    data["metadata"]["name"] = "burst-b1"
    data["spec"]["flux"]["bursting"] = {
        "leadBroker": {"address": "192.0.2.7", "name": "burst", "size": 2, "port": 31001},
        "hostlist": "burst-0,burst-1,burst-b1-0,burst-b1-1",
    }
    mc = load_minicluster(data)
    toml = tomllib.loads(build_config_map(mc, "far", "cluster.local")["data"]["broker.toml"])
    assert toml["bootstrap"]["hosts"] == [
        {"host": "burst-0", "connect": "tcp://192.0.2.7:31001"},
        {"host": "burst-1"},
        {"host": "burst-b1-0", "parent": "burst-0"},
        {"host": "burst-b1-1", "parent": "burst-0"},
    ]
    script = render_entrypoint(mc)
    assert "if false; then" in script and 'if [ "$index" = 0 ]; then' not in script.split('log "lead')[0][-40:]
