"""Converting between the Flux Operator's MiniCluster and ours.

Every shared field maps to itself (ours is a superset). Our extensions do not fit the operator's schema,
so when converting to it they ride along in one annotation and come back on the way in: a round trip in
either direction changes nothing.
"""

from __future__ import annotations

import json
from typing import Any, cast

from miniclusters.api.load import load_minicluster
from miniclusters.api.spec import FLUX_OPERATOR_API_VERSION, OUR_API_VERSION, MiniCluster
from miniclusters.kube_shapes import Manifest

EXTENSIONS_ANNOTATION = "miniclusters.dev/extensions"
# Paths (under spec) of fields the Flux Operator does not have.
EXTENSION_FIELDS: tuple[tuple[str, ...], ...] = (
    ("flux", "flavour"),
    ("flux", "bursting", "plugins"),
    ("restful",),
    ("profiling",),
    ("autoscale",),
    ("multiplexing",),
    ("campaign",),
    ("malleable",),
    ("placement",),
    ("archive", "claimName"),
    ("archive", "unfit"),
)


def _compact(mc: MiniCluster) -> Manifest:
    """The object with only what differs from defaults, as a user would write it."""
    data = mc.model_dump(by_alias=True, exclude_defaults=True, mode="json")
    data["apiVersion"] = mc.api_version
    data["kind"] = mc.kind
    data.setdefault("spec", {})["containers"] = [
        c.model_dump(by_alias=True, exclude_defaults=True, mode="json") for c in mc.spec.containers
    ]
    return cast(Manifest, data)  # the model's wire form: apiVersion, kind, metadata, spec


def _pop_path(mc: Manifest, path: tuple[str, ...]) -> Any:
    """Remove the field at `path` under the MiniCluster's spec; its value (any JSON), None when unset."""
    node = mc["spec"]
    for key in path[:-1]:
        node = node.get(key, {})
    return node.pop(path[-1], None)


# open: a MiniCluster's spec in its wire form, walked by field path (any field the user may write)
def _set_path(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = tree
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def to_flux_operator(mc: MiniCluster) -> Manifest:
    """A `flux-framework.org/v1alpha2` MiniCluster the Flux Operator accepts."""
    data = _compact(mc)
    data["apiVersion"] = FLUX_OPERATOR_API_VERSION
    popped = ((path, _pop_path(data, path)) for path in EXTENSION_FIELDS)
    extensions = {".".join(path): value for path, value in popped if value is not None}
    for section in ("flux", "archive"):
        if data["spec"].get(section) == {}:
            del data["spec"][section]
    if extensions:
        metadata = data.setdefault("metadata", {})
        metadata.setdefault("annotations", {})[EXTENSIONS_ANNOTATION] = json.dumps(extensions, sort_keys=True)
    return data


def from_flux_operator(document: object) -> MiniCluster:
    """Our MiniCluster from an operator object, restoring extensions carried in the annotation."""
    # open: the Flux Operator's MiniCluster document as the user wrote it (a copy), before it is validated
    data: dict[str, Any] = json.loads(json.dumps(document))
    annotations = data.get("metadata", {}).get("annotations", {})
    carried = annotations.pop(EXTENSIONS_ANNOTATION, None)
    if carried:
        for dotted, value in json.loads(carried).items():
            _set_path(data.setdefault("spec", {}), tuple(dotted.split(".")), value)
    if not annotations and "annotations" in data.get("metadata", {}):
        del data["metadata"]["annotations"]
    data["apiVersion"] = OUR_API_VERSION
    return load_minicluster(data)


def to_ours(mc: MiniCluster) -> Manifest:
    """Our own kind, compact."""
    data = _compact(mc)
    data["apiVersion"] = OUR_API_VERSION
    return data
