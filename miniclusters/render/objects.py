"""The small objects around the Job: headless Service, broker ConfigMap, curve-certificate Secret."""

from __future__ import annotations

import base64
import json

from broker.curve_cert import CurveCertificate, generate_certificate, parse_zcert, render_zcert
from miniclusters.api.spec import DEFAULT_BROKER_PORT, MiniCluster
from miniclusters.kube_shapes import ConfigMap, Secret, Service
from miniclusters.render.broker_config import render_broker_toml
from miniclusters.render.entrypoint import render_entrypoint
from miniclusters.render.job import lead_selector
from miniclusters.render.layout import (
    BROKER_TOML,
    BURST_SPEC,
    CURVE_FILE,
    ENTRYPOINT,
    common_labels,
    config_map_name,
    curve_secret_name,
    selector_labels,
)


def build_headless_service(mc: MiniCluster, namespace: str) -> Service:
    """clusterIP None and publishNotReadyAddresses, so brokers resolve each other before they are ready."""
    selector = lead_selector(mc) if mc.spec.flux.minimal_service else selector_labels(mc)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": mc.headless_name, "namespace": namespace, "labels": common_labels(mc)},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [{"name": "broker", "port": DEFAULT_BROKER_PORT, "targetPort": DEFAULT_BROKER_PORT}],
        },
    }


def build_restful_service(mc: MiniCluster, namespace: str) -> Service:
    """A ClusterIP Service in front of the lead broker's REST API (spec.restful.enabled)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{mc.name}-restful", "namespace": namespace, "labels": common_labels(mc)},
        "spec": {
            "type": "ClusterIP",
            "selector": lead_selector(mc),
            "ports": [{"name": "restful", "port": mc.spec.restful.port, "targetPort": mc.spec.restful.port}],
        },
    }


def build_config_map(mc: MiniCluster, namespace: str, cluster_domain: str) -> ConfigMap:
    data = {BROKER_TOML: render_broker_toml(mc, namespace, cluster_domain), ENTRYPOINT: render_entrypoint(mc)}
    if mc.spec.flux.bursting.plugins:  # the lead's burst service makes its bursts from the same spec
        data[BURST_SPEC] = json.dumps(mc.to_dict(), sort_keys=True)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": config_map_name(mc), "namespace": namespace, "labels": common_labels(mc)},
        "data": data,
    }


def certificate_for(mc: MiniCluster, given: CurveCertificate | None = None) -> CurveCertificate:
    """The spec's curveCert when supplied, else the one passed in, else a freshly generated keypair."""
    if mc.spec.flux.curve_cert:
        return parse_zcert(mc.spec.flux.curve_cert)
    return given or generate_certificate(name=f"{mc.name}-0", hostname=f"{mc.name}-0")


def build_curve_secret(mc: MiniCluster, namespace: str, certificate: CurveCertificate) -> Secret:
    """The shared CURVE keypair in zcert format: a Secret, since it holds a private key."""
    encoded = base64.b64encode(render_zcert(certificate).encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": curve_secret_name(mc), "namespace": namespace, "labels": common_labels(mc)},
        "type": "Opaque",
        "data": {CURVE_FILE: encoded},
    }
