"""An example HorizontalPodAutoscaler that drives a MiniCluster's scale subresource from the lead's custom
metrics (`broker/rest/metrics.py`), instead of the built-in autoscaler -- use one or the other, never both
(two writers of spec.size would fight).

The HPA reads an Object metric of the MiniCluster: with target ``AverageValue: 1`` of
``job_queue_state_sched_count`` it wants one pod per pending job, within [max(1, minSize), maxSize]. The metrics
reach the API server through an APIService for ``custom.metrics.k8s.io/v1beta2`` pointing at the operator
(`minicluster operator install --custom-metrics`; operator/metrics_api.py), which reads them in the lead.
"""

from __future__ import annotations

from typing import TypedDict

from miniclusters.api.spec import API_GROUP, API_VERSION, KIND, MiniCluster
from miniclusters.kube_shapes import ObjectMeta

DEFAULT_METRIC = "job_queue_state_sched_count"


class ScaleTarget(TypedDict):
    apiVersion: str
    kind: str
    name: str


class ScalingPolicy(TypedDict):
    type: str
    value: int
    periodSeconds: int


class ScalingRules(TypedDict):
    stabilizationWindowSeconds: int
    policies: list[ScalingPolicy]


class ObjectMetricSource(TypedDict):
    describedObject: ScaleTarget
    metric: dict[str, str]
    target: dict[str, str]


class MetricSpec(TypedDict):
    type: str
    object: ObjectMetricSource


class HpaSpec(TypedDict):
    scaleTargetRef: ScaleTarget
    minReplicas: int
    maxReplicas: int
    metrics: list[MetricSpec]
    behavior: dict[str, ScalingRules]


class HorizontalPodAutoscaler(TypedDict):
    """autoscaling/v2, the fields we emit."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: HpaSpec


def build_hpa(mc: MiniCluster, metric: str = DEFAULT_METRIC, per_pod: int = 1) -> HorizontalPodAutoscaler:
    spec = mc.spec
    target: ScaleTarget = {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": KIND, "name": mc.name}
    metadata: ObjectMeta = {"name": mc.name, "labels": {"app.kubernetes.io/managed-by": "miniclusters"}}
    if mc.metadata.namespace:
        metadata["namespace"] = mc.metadata.namespace
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata,
        "spec": {
            "scaleTargetRef": target.copy(),
            "minReplicas": max(1, spec.min_size),
            "maxReplicas": spec.effective_max_size,
            "metrics": [
                {
                    "type": "Object",
                    "object": {
                        "describedObject": target.copy(),
                        "metric": {"name": metric},
                        "target": {"type": "AverageValue", "averageValue": str(per_pod)},
                    },
                }
            ],
            "behavior": {
                "scaleDown": {
                    "stabilizationWindowSeconds": spec.autoscale.idle_seconds,
                    "policies": [
                        {"type": "Pods", "value": 1, "periodSeconds": max(1, spec.autoscale.cooldown_seconds)}
                    ],
                },
                "scaleUp": {
                    "stabilizationWindowSeconds": 0,
                    "policies": [
                        {
                            "type": "Pods",
                            "value": spec.effective_max_size,
                            "periodSeconds": max(1, spec.autoscale.cooldown_seconds),
                        }
                    ],
                },
            },
        },
    }
