"""Choices that are not part of the spec: where images come from, the cluster domain, a fixed certificate."""

from __future__ import annotations

import os
from dataclasses import dataclass

from broker.curve_cert import CurveCertificate
from miniclusters import __version__
from miniclusters.api.spec import Flavour

DEFAULT_REGISTRY = "ghcr.io/miniclusters"


@dataclass(frozen=True)
class RenderOptions:
    flavour: Flavour | None = None
    """Overrides spec.flux.flavour (the `--flavour` flag)."""
    registry: str = os.environ.get("MINICLUSTERS_REGISTRY", DEFAULT_REGISTRY)
    tag: str = os.environ.get("MINICLUSTERS_TAG", __version__)
    cluster_domain: str = "cluster.local"
    namespace: str | None = None
    """Overrides metadata.namespace (the `--namespace` flag)."""
    certificate: CurveCertificate | None = None
    """Use this keypair instead of generating one (tests, re-renders of a running cluster)."""

    @property
    def broker_image(self) -> str:
        return f"{self.registry}/miniclusters-broker:{self.tag}"
