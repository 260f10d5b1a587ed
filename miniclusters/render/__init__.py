"""Rendering a MiniCluster into Kubernetes objects: pure functions, no cluster needed."""

from __future__ import annotations

from typing import Any

from miniclusters.api.spec import MiniCluster
from miniclusters.render.job import build_job
from miniclusters.render.objects import (
    build_config_map,
    build_curve_secret,
    build_headless_service,
    build_restful_service,
    certificate_for,
)
from miniclusters.render.options import RenderOptions
from miniclusters.render.placement import shape_for_placement

__all__ = ["RenderOptions", "render_minicluster", "with_flavour"]


def with_flavour(mc: MiniCluster, flavour: str | None) -> MiniCluster:
    """The spec with spec.flux.flavour overridden (the `--flavour` flag); unchanged for None."""
    if not flavour or flavour == mc.spec.flux.flavour:
        return mc
    flux = mc.spec.flux.model_copy(update={"flavour": flavour})
    return mc.model_copy(update={"spec": mc.spec.model_copy(update={"flux": flux})})


def render_minicluster(mc: MiniCluster, options: RenderOptions | None = None) -> list[dict[str, Any]]:
    """Every object, in the order they should be applied (config before the pods that mount it)."""
    options = options or RenderOptions()
    mc = shape_for_placement(with_flavour(mc, options.flavour))
    namespace = options.namespace or mc.namespace
    objects = [
        build_curve_secret(mc, namespace, certificate_for(mc, options.certificate)),
        build_config_map(mc, namespace, options.cluster_domain),
        build_headless_service(mc, namespace),
    ]
    if mc.spec.restful.enabled:
        objects.append(build_restful_service(mc, namespace))
    return [*objects, build_job(mc, options)]
