"""Rendering a MiniCluster into Kubernetes objects: pure functions, no cluster needed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from miniclusters.api.spec import MiniCluster
from miniclusters.kube_shapes import ConfigMap, Job, KubeObject, RenderedObject, Secret, Service
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

__all__ = ["RenderOptions", "RenderedObjects", "render_minicluster", "render_objects", "with_flavour"]


def with_flavour(mc: MiniCluster, flavour: str | None) -> MiniCluster:
    """The spec with spec.flux.flavour overridden (the `--flavour` flag); unchanged for None."""
    if not flavour or flavour == mc.spec.flux.flavour:
        return mc
    flux = mc.spec.flux.model_copy(update={"flavour": flavour})
    return mc.model_copy(update={"spec": mc.spec.model_copy(update={"flux": flux})})


@dataclass(frozen=True)
class RenderedObjects:
    """Every object a MiniCluster renders to, each by what it is."""

    secret: Secret
    config_map: ConfigMap
    headless_service: Service
    restful_service: Service | None
    job: Job

    def in_apply_order(self) -> list[RenderedObject]:
        """Config before the pods that mount it: Secret, ConfigMap, the Services, the Job."""
        services = [self.headless_service] + ([self.restful_service] if self.restful_service else [])
        return [self.secret, self.config_map, *services, self.job]


def render_objects(mc: MiniCluster, options: RenderOptions | None = None) -> RenderedObjects:
    """Every object, typed (miniclusters/kube_shapes): what the backends read."""
    options = options or RenderOptions()
    mc = shape_for_placement(with_flavour(mc, options.flavour))
    namespace = options.namespace or mc.namespace
    return RenderedObjects(
        secret=build_curve_secret(mc, namespace, certificate_for(mc, options.certificate)),
        config_map=build_config_map(mc, namespace, options.cluster_domain),
        headless_service=build_headless_service(mc, namespace),
        restful_service=build_restful_service(mc, namespace) if mc.spec.restful.enabled else None,
        job=build_job(mc, options),
    )


def render_minicluster(mc: MiniCluster, options: RenderOptions | None = None) -> list[KubeObject]:
    """Every object, in the order they should be applied (config before the pods that mount it): the list form
    `minicluster render` dumps and the API applies, each object as the API takes any kind."""
    objects = render_objects(mc, options).in_apply_order()
    return [cast(KubeObject, obj) for obj in objects]
