"""The operator inside the real cluster, two replicas: killing the leader hands over within 15 s; `kubectl scale`
grows and shrinks an interactive MiniCluster through the /scale subresource with the lead staying; killing the
leader in the middle of `examples/naca0012-campaign.yaml` loses nothing and runs nothing twice (the campaign's
progress is in status.campaign, the cases were prepared in the lead pod); a HorizontalPodAutoscaler grows a
MiniCluster from 1 to 3 pods from its queue, read through the custom metrics API the operator serves behind the
API server's aggregator."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from miniclusters.testing.kube_e2e import ROOT, apply_crd, cli, kubectl, kubectl_json, objects_of, pod_of, wait_until

OPERATOR_NS = "miniclusters-system"
CAMPAIGNS = Path("/var/tmp/miniclusters-e2e-campaigns")
"""The node's directory the operator and the campaign's pods share (a hostPath: one node)."""


@pytest.fixture(scope="module")
def installed(kubeconfig: Path, crd_installed: None) -> Iterator[None]:
    """The operator installed with a campaign volume for the module; uninstalled afterwards."""
    CAMPAIGNS.mkdir(parents=True, exist_ok=True)
    done = cli("operator", "install", "--campaign-volume", str(CAMPAIGNS), "--custom-metrics", timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    try:
        yield
    finally:
        cli("operator", "uninstall", "--delete-miniclusters", timeout=300)
        apply_crd()


@pytest.fixture
def namespace(kubeconfig: Path, installed: None) -> Iterator[str]:
    name = f"e2e-rep-{uuid.uuid4().hex[:4]}"
    assert kubectl(kubeconfig, "create", "namespace", name).returncode == 0
    try:
        yield name
    finally:
        kubectl(kubeconfig, "delete", "namespace", name, "--wait=false")


def _leader(kubeconfig: Path) -> str:
    lease = kubectl_json(kubeconfig, "get", "lease", "miniclusters-operator", "-n", OPERATOR_NS)
    return str(lease["spec"].get("holderIdentity") or "")


def _operator_pid(pod: str) -> int:
    """The host pid of the operator container's process in ``pod`` (this machine is the node)."""
    from miniclusters.localkube.layout import Layout

    layout = Layout()
    crictl = [str(layout.binary("crictl")), "--runtime-endpoint", f"unix://{layout.containerd_socket}"]
    listed = subprocess.run(
        [*crictl, "ps", "-q", "--label", f"io.kubernetes.pod.name={pod}", "--name", "operator"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    (container,) = listed.stdout.split()
    inspected = subprocess.run([*crictl, "inspect", container], capture_output=True, text=True, timeout=60, check=True)
    return int(json.loads(inspected.stdout)["info"]["pid"])


def _kill_leader(kubeconfig: Path, how: str = "crash") -> tuple[str, float]:
    """End the leader: "crash" (SIGKILL of its process on the node: nothing released, its container restarts)
    or "delete" (its pod deleted: SIGTERM, the Lease released); (its identity, when)."""
    holder = wait_until("a replica leads", lambda: _leader(kubeconfig), timeout=60)
    pod = holder.rsplit("_", 1)[0]
    if how == "crash":
        os.kill(_operator_pid(pod), signal.SIGKILL)
    else:
        killed = kubectl(kubeconfig, "delete", "pod", pod, "-n", OPERATOR_NS, "--grace-period=0", "--force")
        assert killed.returncode == 0, killed.stderr
    return holder, time.monotonic()


@pytest.mark.parametrize("how", ["crash", "delete"])
def test_when_the_leader_ends_another_replica_leads_within_15_s(kubeconfig: Path, installed: None, how: str) -> None:
    wait_until(
        "both replicas Ready",
        lambda: (
            kubectl_json(kubeconfig, "get", "deployment", "miniclusters-operator", "-n", OPERATOR_NS)["status"].get(
                "readyReplicas"
            )
            == 2
        ),
        timeout=120,
    )
    status = cli("operator", "status")
    assert status.returncode == 0 and "leader: miniclusters-operator-" in status.stdout, status.stdout
    dead, killed_at = _kill_leader(kubeconfig, how)
    successor = wait_until(
        "another replica holds the Lease",
        lambda: (holder := _leader(kubeconfig)) and holder != dead and holder,
        timeout=30,
        interval=0.25,
    )
    took = time.monotonic() - killed_at
    print(f"leader {dead} ended ({how}): {successor} leads after {took:.1f}s")
    assert took <= 15.0, f"{successor} took over after {took:.1f}s"


def _flux(name: str, namespace: str, *args: str) -> str:
    done = cli("exec", name, "--backend", "kubernetes", "--namespace", namespace, "--", "flux", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _flux_now(name: str, namespace: str, *args: str) -> str:
    """`flux ARGS` in the lead, '' while it cannot answer yet (no pod, no broker socket: exit 69)."""
    done = cli("exec", name, "--backend", "kubernetes", "--namespace", namespace, "--", "flux", *args)
    return done.stdout if done.returncode == 0 else ""


def test_kubectl_scale_2_4_2_ranks_join_and_leave_the_lead_stays(kubeconfig: Path, namespace: str) -> None:
    spec = yaml.safe_load((ROOT / "examples" / "elastic.yaml").read_text())
    spec["spec"]["maxSize"] = 4
    spec["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "200m", "memory": "256Mi"}
    assert kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(spec)).returncode == 0

    def online(count: int) -> bool:
        rows = [line.split() for line in _flux_now("elastic", namespace, "resource", "list").splitlines()[1:]]
        return sum(int(row[1]) for row in rows if row and row[0] != "down") == count

    wait_until("2 ranks online", lambda: online(2), timeout=300, interval=2)
    lead_uid = pod_of(kubeconfig, namespace, "elastic", 0)["metadata"]["uid"]
    for size in (4, 2):
        scaled = kubectl(kubeconfig, "scale", "minicluster/elastic", "-n", namespace, f"--replicas={size}")
        assert scaled.returncode == 0, scaled.stderr
        wait_until(f"{size} ranks online", functools.partial(online, size), timeout=300, interval=2)
        obj = kubectl_json(kubeconfig, "get", "minicluster/elastic", "-n", namespace)
        assert obj["spec"]["size"] == size and obj["status"]["size"] == size
        assert pod_of(kubeconfig, namespace, "elastic", 0)["metadata"]["uid"] == lead_uid, "the lead stays"
    wait_until(
        "pods 2 and 3 gone",
        lambda: (
            len(
                kubectl_json(kubeconfig, "get", "pods", "-n", namespace, "-l", "app.kubernetes.io/instance=elastic")[
                    "items"
                ]
            )
            == 2
        ),
        timeout=120,
    )
    refused = kubectl(kubeconfig, "scale", "minicluster/elastic", "-n", namespace, "--replicas=5")
    assert refused.returncode != 0 and "spec.maxSize" in refused.stderr, refused.stderr


def _campaign_condition(kubeconfig: Path, namespace: str, name: str) -> dict[str, Any] | None:
    obj = kubectl_json(kubeconfig, "get", f"minicluster/{name}", "-n", namespace)
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == "Campaign"), None)


def test_killing_the_leader_mid_campaign_finishes_it_with_no_member_run_twice(kubeconfig: Path, namespace: str) -> None:
    from elasticity.control.events import read_events
    from miniclusters.api.campaign import CampaignSpec
    from miniclusters.campaign.plan import plan_campaign
    from miniclusters.campaign.results import CampaignEvent, member_results

    name = "naca0012-campaign"
    workdir = CAMPAIGNS / f"{namespace}-{name}"
    workdir.mkdir(parents=True)  # new and empty: the lead pod claims it (its hostPath must exist to be mounted)
    spec = yaml.safe_load((ROOT / "examples" / "naca0012-campaign.yaml").read_text())
    spec["spec"]["campaign"]["workdir"] = str(workdir)
    spec["spec"]["containers"][0]["volumes"] = {"campaign": {"hostPath": str(workdir), "path": str(workdir)}}
    spec["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "900m"  # 2 pods beside 2 operator replicas
    assert kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(spec)).returncode == 0

    def submitted() -> dict[str, Any] | None:
        obj = kubectl_json(kubeconfig, "get", f"minicluster/{name}", "-n", namespace)
        record = (obj.get("status") or {}).get("campaign") or {}
        return record if record.get("jobs") and not record.get("outcome") else None

    record = wait_until("an ensemble submitted and recorded in status.campaign", submitted, timeout=600, interval=2)
    _kill_leader(kubeconfig)

    def ended() -> dict[str, Any] | None:
        condition = _campaign_condition(kubeconfig, namespace, name)
        return condition if condition and condition["reason"] in ("Done", "DoneWithFailures", "Cancelled") else None

    condition = wait_until("the campaign ends", ended, timeout=1200, interval=3)
    assert condition["reason"] == "Done" and condition["message"].startswith("6/6 members completed"), condition
    final = kubectl_json(kubeconfig, "get", f"minicluster/{name}", "-n", namespace)["status"]["campaign"]
    assert (
        final["outcome"] == "done"
        and set(final["jobs"]) == {"alpha", "mach"}
        and final["jobs"]["alpha"] == (record["jobs"].get("alpha", final["jobs"]["alpha"]))
    )
    # no member twice: the lead ran exactly one sub-instance per ensemble, and no rerun was needed
    batches = _flux(name, namespace, "jobs", "-a", "-no", "{name}").split()
    assert sorted(batches) == ["alpha", "mach"], batches
    events = list(read_events(workdir / "events.jsonl"))
    kinds = [e["kind"] for e in events]
    assert kinds.count("campaign-resume") == 1 and "ensemble-rerun" not in kinds, kinds
    assert [e["ensemble"] for e in events if e["kind"] == "submitted"].count("alpha") == 1
    plan = plan_campaign(CampaignSpec.model_validate(spec["spec"]["campaign"]), workdir)
    results = member_results(plan, cast(list[CampaignEvent], events))  # the log as the runner wrote it
    assert len(results) == 6 and all(r.state == "done" and r.cl is not None and r.cd for r in results), results
    kubectl(kubeconfig, "delete", "minicluster", name, "-n", namespace, "--cascade=foreground")
    wait_until("no object of the campaign left", lambda: not objects_of(kubeconfig, namespace, name), timeout=180)


def test_an_hpa_grows_a_minicluster_from_1_to_3_from_its_queue_through_the_custom_metrics_api(
    kubeconfig: Path, namespace: str
) -> None:
    from miniclusters.api.load import load_minicluster
    from miniclusters.render.hpa import build_hpa

    wait_until(
        "the APIService v1beta2.custom.metrics.k8s.io is Available",
        lambda: any(
            c["type"] == "Available" and c["status"] == "True"
            for c in kubectl_json(kubeconfig, "get", "apiservice", "v1beta2.custom.metrics.k8s.io")["status"].get(
                "conditions", []
            )
        ),
        timeout=120,
    )
    spec = yaml.safe_load((ROOT / "examples" / "autoscale.yaml").read_text())
    spec["metadata"].update(name="queue", namespace=namespace)
    spec["spec"].update(maxSize=3, autoscale={"enabled": False, "idleSeconds": 30, "cooldownSeconds": 2})
    spec["spec"]["containers"][0].update(image="ghcr.io/miniclusters/openmpi-openfoam:0.1.0")
    spec["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "200m"
    assert kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(spec)).returncode == 0
    wait_until(
        "the lead answers", lambda: "free" in _flux_now("queue", namespace, "resource", "list"), timeout=300, interval=2
    )
    raw = f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{namespace}/miniclusters.miniclusters.dev/queue"
    read = kubectl(kubeconfig, "get", "--raw", f"{raw}/job_queue_state_sched_count")
    assert read.returncode == 0 and json.loads(read.stdout)["items"][0]["value"] == "0", read.stdout + read.stderr

    hpa = build_hpa(load_minicluster(spec))
    assert kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(hpa)).returncode == 0
    # 4 jobs of a whole node each: 1 runs, 3 wait; the HPA wants one pod per waiting job, up to maxSize 3
    _flux("queue", namespace, "submit", "--cc=1-4", "-N", "1", "--exclusive", "sleep", "300")
    started = time.monotonic()

    def size() -> int:
        return int(kubectl_json(kubeconfig, "get", "minicluster/queue", "-n", namespace)["spec"]["size"])

    wait_until("the HPA grew the MiniCluster to 3", lambda: size() == 3, timeout=180, interval=2)
    grew = time.monotonic() - started
    waiting = json.loads(kubectl(kubeconfig, "get", "--raw", f"{raw}/job_queue_state_sched_count").stdout)
    status = kubectl_json(kubeconfig, "get", "hpa", "queue", "-n", namespace)["status"]
    print(f"HPA: 1 -> 3 pods {grew:.1f}s after 4 jobs were submitted; now {waiting['items'][0]['value']} waiting")
    assert status["desiredReplicas"] >= 3 or status["currentReplicas"] == 3, status
    wait_until(
        "3 pods Running",
        lambda: (
            sum(
                p["status"].get("phase") == "Running"
                for p in kubectl_json(
                    kubeconfig, "get", "pods", "-n", namespace, "-l", "app.kubernetes.io/instance=queue"
                )["items"]
            )
            == 3
        ),
        timeout=180,
    )


def test_killing_the_leader_mid_multiplexing_goes_on_with_the_run_starting_no_simulation_twice(
    kubeconfig: Path, namespace: str
) -> None:
    spec = yaml.safe_load((ROOT / "examples" / "multiplex.yaml").read_text())
    spec["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "900m"  # 2 pods beside 2 operator replicas
    spec["spec"]["multiplexing"]["command"] = "proxy_solver 1000 2048 32 1,1,1,20"  # shorter than the example's
    assert kubectl(kubeconfig, "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(spec)).returncode == 0

    def status() -> dict[str, Any]:
        return kubectl_json(kubeconfig, "get", "minicluster/multiplex", "-n", namespace).get("status") or {}

    record = wait_until(
        "a simulation submitted and recorded in status.multiplexing",
        lambda: (r := status().get("multiplexing") or {}) and r.get("jobs") and not r.get("outcome") and r,
        timeout=300,
        interval=1,
    )
    _kill_leader(kubeconfig)

    def ended() -> dict[str, Any] | None:
        found = next((c for c in status().get("conditions", []) if c["type"] == "Multiplexing"), None)
        return found if found and found["reason"] in ("Done", "LoopFailed", "Disabled") else None

    condition = wait_until("the Multiplexing condition says Done", ended, timeout=600, interval=3)
    assert condition["reason"] == "Done" and "3 finished" in condition["message"], condition
    final = status()["multiplexing"]
    assert final["outcome"] == "done" and final["run"] == record["run"], (record, final)
    assert set(record["jobs"].items()) <= set(final["jobs"].items()), "the first leader's jobs were gone on with"
    names = _flux("multiplex", namespace, "jobs", "-a", "-no", "{name}").split()
    assert sorted(names) == ["sim1", "sim2", "sim3"], names
