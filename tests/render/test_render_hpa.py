"""The example HPA: a valid autoscaling/v2 object driving the MiniCluster's scale subresource from the lead's
custom metrics, within [max(1, minSize), maxSize]; examples/hpa/autoscale-hpa.yaml is what build_hpa renders."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import yaml

from miniclusters.api import load_minicluster_file
from miniclusters.render.hpa import build_hpa

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_example_hpa_is_rendered_and_valid() -> None:
    mc = load_minicluster_file(EXAMPLES / "autoscale.yaml")
    hpa = build_hpa(mc)
    kubernetes_validate.validate(hpa, "1.33", strict=True)
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {
        "apiVersion": "miniclusters.dev/v1alpha1",
        "kind": "MiniCluster",
        "name": "autoscale",
    }
    assert (spec["minReplicas"], spec["maxReplicas"]) == (1, 4)
    (metric,) = spec["metrics"]
    assert metric["object"]["metric"]["name"] == "job_queue_state_sched_count"
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == mc.spec.autoscale.idle_seconds
    assert yaml.safe_load((EXAMPLES / "hpa" / "autoscale-hpa.yaml").read_text()) == hpa
