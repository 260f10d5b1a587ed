"""Spec commands: validate, render, convert, crd — thin shells over the api and render packages."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

import click
import yaml

from miniclusters.api import MiniCluster, SpecError, load_minicluster_file
from miniclusters.kube_shapes import KubeObject
from miniclusters.render import RenderOptions, render_minicluster
from miniclusters.render.placement import placement_summary

EXIT_INVALID = 2


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings (scripts, TOML), so rendered ConfigMaps stay readable."""


def _str_presenter(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_presenter)


def dump_yaml_stream(objects: Iterable[object]) -> str:
    """Documents (Kubernetes objects, MiniClusters: anything YAML represents) as one `---`-separated stream."""
    return yaml.dump_all(list(objects), Dumper=_Dumper, sort_keys=False, explicit_start=True)


def _load_all(files: Iterable[str]) -> list[MiniCluster]:
    """Load every file, report every problem in every file, exit 2 if any was invalid."""
    loaded, failed = [], False
    for name in files:
        try:
            loaded.append(load_minicluster_file(name))
        except SpecError as exc:
            click.echo(str(exc), err=True)
            failed = True
    if failed:
        sys.exit(EXIT_INVALID)
    return loaded


def _schema_problems(objects: Iterable[KubeObject], version: str) -> list[str]:
    """Check rendered objects against the official Kubernetes schemas, when kubernetes-validate is installed."""
    try:
        import kubernetes_validate
    except ImportError:
        return []
    problems = []
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            problems.append(f"{obj['kind']}/{obj['metadata']['name']} {path}: {exc.message}")
    return problems


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--kubernetes-version",
    default="1.33",
    show_default=True,
    help="Also check the rendered objects against this Kubernetes version's schemas (needs kubernetes-validate).",
)
def validate(files: tuple[str, ...], kubernetes_version: str) -> None:
    """Check MiniCluster files; list every problem with its field path (exit code 2 if any).

    Flux Operator files (flux-framework.org/v1alpha2) are accepted unchanged.

    \b
    Example:
      minicluster validate examples/*.yaml
    """
    clusters = _load_all(files)
    failed = False
    for name, mc in zip(files, clusters, strict=True):
        problems: list[str] = []
        for flavour in ("builtin", "flux"):
            objects = render_minicluster(mc, RenderOptions(flavour=flavour))
            problems += [f"{flavour}: {p}" for p in _schema_problems(objects, kubernetes_version)]
        if problems:
            failed = True
            click.echo(f"{name}: rendered objects fail the Kubernetes {kubernetes_version} schema:", err=True)
            for problem in problems:
                click.echo(f"  - {problem}", err=True)
            continue
        spec = mc.spec
        click.echo(
            f"{name}: valid MiniCluster {mc.name!r} (size {spec.size}, maxSize {spec.effective_max_size}, "
            f"flavour {spec.flux.flavour}, {mc.api_version})"
        )
        placed = placement_summary(mc)
        if placed:
            click.echo(f"  placement: {placed}")
    if failed:
        sys.exit(EXIT_INVALID)


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--flavour", type=click.Choice(["builtin", "flux"]), help="Override spec.flux.flavour.")
@click.option("-n", "--namespace", help="Override metadata.namespace.")
@click.option("--registry", help="Registry of our images (default $MINICLUSTERS_REGISTRY or ghcr.io/miniclusters).")
@click.option("--tag", help="Tag of our images (default $MINICLUSTERS_TAG or the package version).")
@click.option("--cluster-domain", default="cluster.local", show_default=True, help="The cluster's DNS domain.")
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True)
def render(
    files: tuple[str, ...],
    flavour: str | None,
    namespace: str | None,
    registry: str | None,
    tag: str | None,
    cluster_domain: str,
    output: str,
) -> None:
    """Print the Kubernetes objects a MiniCluster becomes, as a stream `kubectl apply -f -` accepts.

    Secret (curve certificate), ConfigMap (broker TOML and entrypoint), headless Service, Indexed Job.
    A new CURVE keypair is generated on each render unless the spec supplies flux.curveCert.

    \b
    Example:
      minicluster render examples/hello.yaml --flavour flux | kubectl apply -f -
    """
    defaults = RenderOptions()
    options = RenderOptions(
        flavour=flavour,  # type: ignore[arg-type]
        namespace=namespace,
        registry=registry or defaults.registry,
        tag=tag or defaults.tag,
        cluster_domain=cluster_domain,
    )
    objects: list[KubeObject] = []
    for mc in _load_all(files):
        objects += render_minicluster(mc, options)
    if output == "json":
        click.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2))
    else:
        click.echo(dump_yaml_stream(dict(o) for o in objects), nl=False)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--to",
    "target",
    type=click.Choice(["flux-operator", "miniclusters"]),
    required=True,
    help="flux-operator: flux-framework.org/v1alpha2; miniclusters: our own API group.",
)
def convert(file: str, target: str) -> None:
    """Convert a MiniCluster between the Flux Operator's kind and ours (lossless both ways).

    \b
    Example:
      minicluster convert examples/flux-operator-lammps.yaml --to miniclusters
    """
    from miniclusters.api.conversion import to_flux_operator, to_ours

    (mc,) = _load_all([file])
    data = to_flux_operator(mc) if target == "flux-operator" else to_ours(mc)
    click.echo(dump_yaml_stream([data]), nl=False)


@click.command()
@click.option("--output", type=click.Path(dir_okay=False), help="Write to this file instead of stdout.")
def crd(output: str | None) -> None:
    """Print our CustomResourceDefinition, generated from the spec models.

    \b
    Example:
      minicluster crd | kubectl apply --server-side -f -
    """
    from miniclusters.api.crd import build_crd

    text = dump_yaml_stream([dict(build_crd())])
    if output:
        Path(output).write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)
