"""What we send for one MiniCluster: the custom resource, then the rendered objects owned by it.

Shared by client-side `up` and the operator so both produce byte-identical objects. Two things make repeated
applies safe: the CURVE certificate of an existing Secret is reused (re-rendering would rotate it under running
brokers), and the Job carries a fingerprint of its pod template without the size (the template is immutable,
while the size changes by scaling).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from dataclasses import replace
from typing import cast

from broker.curve_cert import CurveCertificate, parse_zcert
from miniclusters.api.spec import MiniCluster
from miniclusters.kube_shapes import KubeObject, OwnerReference, PodTemplate
from miniclusters.render import RenderOptions, render_objects
from miniclusters.render.layout import CURVE_FILE, NAME_LABEL, curve_secret_name

TEMPLATE_HASH_ANNOTATION = "miniclusters.dev/template-hash"
SIZE_ENV = "MINICLUSTER_SIZE"


def selector_for(name: str) -> str:
    """The label selector of a MiniCluster's pods (status.selector, for the scale subresource)."""
    return f"{NAME_LABEL}={name}"


def owner_reference(owner: KubeObject) -> OwnerReference:
    """Makes `owner` the controller of an object, so deleting the MiniCluster deletes it (garbage collection)."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def custom_resource(mc: MiniCluster, namespace: str) -> KubeObject:
    """Our MiniCluster object as sent to the API (no status: that belongs to the status subresource)."""
    data = mc.to_dict()
    data.pop("status", None)
    meta = data["metadata"]
    keep = {"name", "namespace", "labels", "annotations"}
    data["metadata"] = {k: v for k, v in meta.items() if k in keep and v != {}}
    data["metadata"]["namespace"] = namespace
    return cast(KubeObject, data)  # the MiniCluster as JSON (MiniCluster.to_dict): its spec as the CRD has it


def certificate_from_secret(secret: KubeObject | None) -> CurveCertificate | None:
    """The keypair stored in an existing curve Secret, or None when absent or unreadable."""
    if not secret:
        return None
    encoded = (secret.get("data") or {}).get(CURVE_FILE)
    if not encoded:
        return None
    try:
        return parse_zcert(base64.b64decode(encoded).decode())
    except (ValueError, UnicodeDecodeError):
        return None


def template_fingerprint(template: PodTemplate) -> str:
    """A hash of the pod template, leaving out the size (which scaling changes without a new template)."""
    normalized = copy.deepcopy(template)
    for container in normalized.get("spec", {}).get("containers", []):
        if "env" in container:
            container["env"] = [e for e in container["env"] if e.get("name") != SIZE_ENV]
    text = json.dumps(normalized, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def desired_objects(
    mc: MiniCluster,
    namespace: str,
    owner: KubeObject | None,
    options: RenderOptions,
    certificate: CurveCertificate | None = None,
) -> list[KubeObject]:
    """Secret, ConfigMap, Service, Job in apply order, owned by `owner` (the MiniCluster object) when given."""
    options = replace(options, namespace=namespace, certificate=certificate or options.certificate)
    rendered = render_objects(mc, options)
    objects = rendered.in_apply_order()
    if owner is not None:
        reference = owner_reference(owner)
        for obj in objects:
            obj["metadata"]["ownerReferences"] = [reference.copy()]
    job = rendered.job
    annotations = job["metadata"].setdefault("annotations", {})
    annotations[TEMPLATE_HASH_ANNOTATION] = template_fingerprint(job["spec"]["template"])
    return [cast(KubeObject, obj) for obj in objects]  # what render made, as the API takes any kind


def secret_name(mc: MiniCluster) -> str:
    return curve_secret_name(mc)
