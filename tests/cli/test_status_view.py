"""`minicluster status` reads like kubectl: words for conditions and pod states, the effective size floor, no
invented CPU figures, RESTARTS, the REST URL, and the text saying exactly what the JSON says."""

from __future__ import annotations

from miniclusters.backends.base import ClusterCondition, ClusterStatus, PodCondition, PodStatus
from miniclusters.cli.status_view import compress_ranks, render_status_text, status_document
from miniclusters.testing.status_text import disagreements, parse_status_text


def _pod(index: int, phase: str, **extra: object) -> PodStatus:
    fields: dict[str, object] = {"node": f"10.0.0.{index}", **extra}
    return PodStatus(index=index, name=f"c-{index}", phase=phase, **fields)  # type: ignore[arg-type]


def test_a_finished_run_reads_as_completed_not_unknown() -> None:
    status = ClusterStatus(
        name="c",
        namespace="local",
        size=2,
        max_size=2,
        min_size=0,
        pods=(_pod(0, "Succeeded", exit_code=0), _pod(1, "Succeeded", exit_code=0)),
        finished=True,
        succeeded=True,
    )
    document = status_document(status)
    text = render_status_text(document)
    assert disagreements(text, dict(document)) == []
    header = parse_status_text(text)["header"]
    assert header["State"] == "Completed" and header["Size"] == "2 pods (min 1, max 2)"
    assert document["min_size"] == 1  # the floor the text shows, not the unset 0
    assert "unknown" not in text and header["Ranks"] == "none (the lead has finished)"
    pods = parse_status_text(text)["pods"]
    assert [p["STATUS"] for p in pods] == ["Completed", "Completed"] and [p["READY"] for p in pods] == ["0/1"] * 2
    assert [p["CPU(NOW)"] for p in pods] == ["-", "-"] and document["pods"][0]["cpu_actual"] is None


def test_running_cluster_with_restarts_conditions_and_rest_url() -> None:
    status = ClusterStatus(
        name="c",
        namespace="hpc",
        size=3,
        max_size=8,
        min_size=2,
        pods=(
            _pod(0, "Running", ready=True, cpu_desired="500m", cpu_actual="500m"),
            _pod(1, "Running", restarts=2, reason="CrashLoopBackOff", cpu_desired="500m", cpu_actual="500m"),
            _pod(2, "Failed", restarts=4, reason="BackoffLimitExceeded", exit_code=137),
        ),
        ranks_up=(0,),
        ranks_down=(1, 2, 3, 4, 5, 6, 7),
        conditions=(
            ClusterCondition("Isolation", "True", "Namespaces", "each pod has its own network namespace"),
            ClusterCondition("Queue", "True", "Busy", "1 running, 2 pending"),
        ),
        rest_url="http://10.213.1.2:5000",
    )
    document = status_document(status)
    text = render_status_text(document)
    assert disagreements(text, dict(document)) == []
    parsed = parse_status_text(text)
    assert parsed["header"]["REST API"] == "http://10.213.1.2:5000"
    assert parsed["header"]["Ranks"] == "0 up, 1-7 down" and document["state"] == "Degraded"
    assert [(p["STATUS"], p["RESTARTS"]) for p in parsed["pods"]] == [
        ("Running", "0"),
        ("CrashLoopBackOff", "2"),
        ("BackoffLimitExceeded", "4"),
    ]
    assert [c["REASON"] for c in parsed["conditions"]] == ["Namespaces", "Busy"]
    assert "=True" not in text  # conditions are a table of words, not type=status pairs


def test_pods_waiting_for_a_node_say_why_as_the_scheduler_said_it() -> None:
    """A Pending pod's STATUS does not say the cluster is out of CPU; the scheduler's words do (seen on the real
    one-node cluster: `scale elastic 6` left 4 pods Pending for 1 Insufficient cpu)."""
    full = "0/1 nodes are available: 1 Insufficient cpu."
    unschedulable = (PodCondition("PodScheduled", "False", "Unschedulable", full),)
    pods = (
        _pod(0, "Running", ready=True),
        *(_pod(i, "Pending", node=None, conditions=unschedulable) for i in (1, 2, 4)),
        _pod(3, "Pending", node=None, conditions=(PodCondition("PodScheduled", "False", "SchedulingGated"),)),
        _pod(5, "Pending", node=None, conditions=(PodCondition("PodScheduled", "True"),)),
    )
    status = ClusterStatus(name="c", namespace="hpc", size=6, max_size=8, min_size=2, pods=pods)
    document = status_document(status)
    text = render_status_text(document)
    assert text.endswith(f"\n\nNot scheduled:\n  pods 1-2,4: Unschedulable: {full}\n  pod 3: SchedulingGated")
    assert disagreements(text, dict(document)) == []
    assert parse_status_text(text)["unscheduled"] == {
        1: f"Unschedulable: {full}",
        2: f"Unschedulable: {full}",
        4: f"Unschedulable: {full}",
        3: "SchedulingGated",
    }
    assert disagreements(text.replace("1-2,4", "1-2"), dict(document)) == [
        f"c-4 not scheduled: text None, JSON 'Unschedulable: {full}'"
    ]
    assert "Not scheduled" not in render_status_text(
        status_document(ClusterStatus(name="c", namespace="hpc", size=1, max_size=1, min_size=1, pods=pods[:1]))
    )


def test_disagreements_are_caught() -> None:
    status = ClusterStatus(name="c", namespace="local", size=1, max_size=1, min_size=1, pods=(_pod(0, "Running"),))
    document = status_document(status)
    text = render_status_text(document).replace("Running ", "Pending ")
    assert disagreements(text, dict(document))


def test_compress_ranks() -> None:
    assert compress_ranks([0, 1, 2, 3, 5, 7, 8]) == "0-3,5,7-8" and compress_ranks([]) == ""


def test_jsonpath_prints_one_fact() -> None:
    from miniclusters.cli.status_view import render_jsonpath

    status = ClusterStatus(
        name="c",
        namespace="local",
        size=1,
        max_size=2,
        min_size=0,
        pods=(_pod(0, "Running", ready=True, restarts=3),),
        rest_url="http://10.213.1.2:5000",
    )
    document = status_document(status)
    assert render_jsonpath(document, "{.rest_url}") == "http://10.213.1.2:5000"
    assert render_jsonpath(document, "{.pods[0].name} {.pods[0].restarts} {.pods[0].ready}") == "c-0 3 true"
    for bad in ("{.nothing}", "{.pods[4].name}", "plain text", "{.pods.0}"):
        try:
            render_jsonpath(document, bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was accepted")
