"""Deployment manifests are generated and in sync; RBAC is least privilege; Dockerfiles lint clean and
build what the renderer points at; the broker's install.sh really provides bin/flux."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from dockerfile_parse import DockerfileParser

from broker.testing import require_tool
from miniclusters import __version__
from miniclusters.api import load_minicluster_file
from miniclusters.cli.spec_commands import dump_yaml_stream
from miniclusters.kube_shapes import KubeObject
from miniclusters.operator.manifests import build_manifests, rbac_rules
from miniclusters.render import RenderOptions, render_minicluster
from miniclusters.render.options import DEFAULT_REGISTRY

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "images"
DEPLOY = ROOT / "crds" / "deploy" / "operator.yaml"
DOCKERFILES = sorted(IMAGES.glob("*/Dockerfile"))
COMMITTED = RenderOptions(registry=DEFAULT_REGISTRY, tag=__version__)


def test_committed_manifests_match_the_generator() -> None:
    expected = dump_yaml_stream(dict(m) for m in build_manifests(COMMITTED))  # as `minicluster manifests` does
    assert DEPLOY.read_text() == expected, "run: minicluster manifests --output crds/deploy/operator.yaml"


def test_manifests_pass_the_kubernetes_schema() -> None:
    for obj in build_manifests(COMMITTED) + build_manifests(COMMITTED, accept_flux_kind=True):
        kubernetes_validate.validate(obj, "1.33", strict=True)


def test_rbac_is_least_privilege() -> None:
    rules = rbac_rules()
    flat = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    assert not any("*" in part for entry in flat for part in entry)
    assert {v for _, r, v in flat if r == "pods/resize"} == {"patch"}, "multiplexing resizes in place, nothing more"
    assert not any(r == "pods" and v in ("patch", "update") for _, r, v in flat), "never the pod spec itself"
    exec_verbs = {v for _, r, v in flat if r == "pods/exec"}
    assert exec_verbs == {"get", "create"}, "the autoscaler's queue is read by exec (websocket GET; create from 1.35)"
    assert not any(v == "delete" and r != "miniclusters" for _, r, v in flat), "dependents go by garbage collection"
    assert ("", "secrets", "list") not in flat, "secrets are read by name only"
    assert ("batch", "jobs", "create") in flat and ("batch", "jobs", "patch") in flat  # apply creates and patches
    assert ("miniclusters.dev", "miniclusters/status", "update") in flat
    assert ("events.k8s.io", "events", "create") in flat


def test_deployment_runs_the_operator_from_the_broker_image() -> None:
    deployment = build_manifests(COMMITTED)[-1]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == COMMITTED.broker_image
    assert container["command"] == ["/opt/miniclusters/env/bin/minicluster"] and container["args"][0] == "operator"
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def _parse(path: Path) -> DockerfileParser:
    parser = DockerfileParser(fileobj=path.open("rb"))
    return parser


def _arg_defaults(parser: DockerfileParser) -> dict[str, str]:
    """ARG NAME=DEFAULT values, by name (the published Dockerfiles' defaults, e.g. BASE=debian:12.9-slim)."""
    defaults: dict[str, str] = {}
    for instruction in parser.structure:
        if instruction["instruction"] == "ARG" and "=" in instruction["value"]:
            name, _, value = instruction["value"].partition("=")
            defaults.setdefault(name.strip(), value.strip().strip('"'))
    return defaults


def _substitute(text: str, defaults: dict[str, str]) -> str:
    for name, value in defaults.items():
        text = text.replace(f"${{{name}}}", value).replace(f"${name}", value)
    return text


# Files images/build.sh puts into the build context before building (git-ignored): where they come from.
STAGED = {"images/flux-view/flux-core-0.88.0.tar.gz": ROOT.parent / "shared" / "peers" / "flux-core-0.88.0.tar.gz"}


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfiles_pin_base_images_and_have_a_title(path: Path) -> None:
    parser = _parse(path)
    defaults = _arg_defaults(parser)
    froms = [_substitute(i["value"].split()[0], defaults) for i in parser.structure if i["instruction"] == "FROM"]
    stages = {
        i["value"].split()[-1] for i in parser.structure if i["instruction"] == "FROM" and " AS " in i["value"].upper()
    }
    assert froms
    for image in froms:
        if image in stages or image == "scratch":  # scratch: the empty image, nothing to pin
            continue
        assert "$" not in image, f"{image}: give the ARG a default"
        assert ":" in image.rsplit("/", 1)[-1], f"{image}: pin a tag"
        assert not image.endswith(":latest"), f"{image}: never latest"
    assert parser.labels.get("org.opencontainers.image.title")
    for instruction in parser.structure:
        if instruction["instruction"] == "RUN" and "apt-get install" in instruction["value"]:
            assert "--no-install-recommends" in instruction["value"]
            assert "rm -rf /var/lib/apt/lists" in instruction["value"]
        if instruction["instruction"] in ("COPY", "ADD") and "--from" not in instruction["value"]:
            for source in instruction["value"].split()[:-1]:
                source = _substitute(source, defaults)
                assert (ROOT / source).exists() or STAGED[source].exists(), f"{path}: COPY source {source} missing"


def test_published_dockerfiles_default_to_a_registry_base_and_build_sh_overrides_it() -> None:
    """Where registries answer, `docker build` alone works (BASE defaults to Debian's registry image); build.sh
    passes the debian:12 it pulled or made (images/base.sh)."""
    for path in DOCKERFILES:
        assert _arg_defaults(_parse(path))["BASE"].startswith("debian:12")
    build = (IMAGES / "build.sh").read_text()
    assert '--build-arg "BASE=$base"' in build and "images/base.sh" in build


def test_image_names_match_what_the_renderer_points_at() -> None:
    titles = {p.parent.name: _parse(p).labels["org.opencontainers.image.title"] for p in DOCKERFILES}
    options = RenderOptions(registry="reg.example/hpc", tag="9.9")
    assert options.broker_image == f"reg.example/hpc/{titles['broker']}:9.9"
    mc = load_minicluster_file(ROOT / "examples" / "hello.yaml")
    assert mc.spec.containers[0].image == f"{DEFAULT_REGISTRY}/{titles['openmpi-openfoam']}:{__version__}"
    job = render_minicluster(mc, options)[-1]
    (init,) = job["spec"]["template"]["spec"]["initContainers"]
    assert init["image"] == options.broker_image
    assert init["command"] == ["/opt/miniclusters/install.sh", "/mnt/miniclusters"]
    build = (IMAGES / "build.sh").read_text()
    assert all(title in build for title in titles.values())


def test_only_pods_that_use_the_bundle_s_extras_are_given_them() -> None:
    """numpy, matplotlib and the Kubernetes client are copied for a campaign and for the burst service, and in
    the lead's pod alone where it runs the REST server (its /cluster page draws figures)."""
    commands = {}
    for example in ("hello", "naca0012-campaign", "burst", "restful"):
        mc = load_minicluster_file(ROOT / "examples" / f"{example}.yaml")
        (init,) = render_minicluster(mc, COMMITTED)[-1]["spec"]["template"]["spec"]["initContainers"]
        commands[example] = init["command"]
    assert commands["hello"] == ["/opt/miniclusters/install.sh", "/mnt/miniclusters"]
    assert commands["naca0012-campaign"] == commands["burst"] == [*commands["hello"], "--with-extras"]
    assert commands["restful"] == [*commands["hello"], "--with-extras-on-lead"]


def test_broker_image_installs_install_sh_and_the_bundle_names() -> None:
    parser = _parse(IMAGES / "broker" / "Dockerfile")
    copies = [i["value"] for i in parser.structure if i["instruction"] == "COPY"]
    assert "images/broker/install.sh /opt/miniclusters/install.sh" in copies
    runs = " ".join(i["value"] for i in parser.structure if i["instruction"] == "RUN")
    assert "for name in flux minicluster python3" in runs  # the names miniclusters/frozen.py answers to
    assert "from miniclusters.frozen import main" in (IMAGES / "broker" / "bundle.py").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'flux = "broker.cli.flux:main"' in pyproject and 'minicluster = "miniclusters.cli:main"' in pyproject


def test_flux_view_image_keeps_the_layout_the_renderer_copies() -> None:
    from miniclusters.backends.local.flux_view import VERSION

    parser = _parse(IMAGES / "flux-view" / "Dockerfile")
    assert _arg_defaults(parser)["FLUX_CORE_VERSION"] == VERSION, "the flux-core the tests and the view agree on"
    mc = load_minicluster_file(ROOT / "examples" / "hello.yaml")
    job = render_minicluster(mc, RenderOptions(flavour="flux"))[-1]
    command = " ".join(job["spec"]["template"]["spec"]["initContainers"][0]["command"])
    assert "/opt/view" in command and "/opt/software" in command
    assert "test -d /opt/view && test -d /opt/software" in parser.content


def test_install_sh_copies_a_working_environment(tmp_path: Path) -> None:
    """Run install.sh for real against a stand-in environment whose flux runs on this interpreter."""
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    flux = env / "bin" / "flux"  # the bundle's flux, played by this interpreter
    flux.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m broker.cli.flux "$@"\n')
    flux.chmod(0o755)
    dest = tmp_path / "mnt" / "miniclusters"
    result = subprocess.run(
        ["/bin/sh", str(IMAGES / "broker" / "install.sh"), str(dest)],
        env={**os.environ, "MINICLUSTERS_ENV": str(env)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    overlay = subprocess.run(
        [str(dest / "bin" / "flux"), "overlay", "--help"], capture_output=True, text=True, timeout=60
    )
    assert overlay.returncode == 0 and "status" in overlay.stdout
    missing = subprocess.run(["/bin/sh", str(IMAGES / "broker" / "install.sh")], capture_output=True, text=True)
    assert missing.returncode != 0 and "usage" in missing.stderr


def test_install_sh_copies_the_extras_only_when_asked(tmp_path: Path) -> None:
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "flux").write_text("#!/bin/sh\nexit 0\n")
    (env / "bin" / "flux").chmod(0o755)
    (env / "extras" / "numpy").mkdir(parents=True)
    (env / "extras" / "numpy" / "__init__.py").write_text("")

    def install(dest: Path, *options: str, index: str = "0") -> subprocess.CompletedProcess[str]:
        argv = ["/bin/sh", str(IMAGES / "broker" / "install.sh"), str(dest), *options]
        environ = {**os.environ, "MINICLUSTERS_ENV": str(env), "JOB_COMPLETION_INDEX": index}
        return subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=60)

    core = install(tmp_path / "core")
    assert core.returncode == 0, core.stderr
    assert (tmp_path / "core" / "bin" / "flux").exists() and not (tmp_path / "core" / "extras").exists()
    full = install(tmp_path / "full", "--with-extras")
    assert full.returncode == 0 and "with its extras" in full.stdout, full.stderr
    assert (tmp_path / "full" / "extras" / "numpy" / "__init__.py").exists()
    lead = install(tmp_path / "lead", "--with-extras-on-lead", index="0")
    assert lead.returncode == 0 and (tmp_path / "lead" / "extras" / "numpy").exists(), lead.stderr
    follower = install(tmp_path / "follower", "--with-extras-on-lead", index="3")
    assert follower.returncode == 0, follower.stderr
    assert (tmp_path / "follower" / "bin" / "flux").exists() and not (tmp_path / "follower" / "extras").exists()
    wrong = install(tmp_path / "wrong", "--with-extra")
    assert wrong.returncode == 2 and "unknown option --with-extra" in wrong.stderr
    assert not (tmp_path / "wrong").exists()  # refused before anything was copied


def test_mpi_hello_compiles(tmp_path: Path) -> None:
    require_tool("mpicc", "libopenmpi-dev openmpi-bin")
    source = IMAGES / "openmpi-openfoam" / "mpi-hello.c"
    result = subprocess.run(["mpicc", "-o", str(tmp_path / "mpi-hello"), str(source)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_render_output_for_every_example_passes_the_schema_with_owner_references() -> None:
    from miniclusters.backends.kubernetes.objects import custom_resource, desired_objects

    for path in sorted((ROOT / "examples").glob("*.yaml")):
        mc = load_minicluster_file(path)
        owner: KubeObject = {**custom_resource(mc, "hpc"), "metadata": {"name": mc.name, "uid": "u-1"}}
        for obj in desired_objects(mc, "hpc", owner, COMMITTED):
            kubernetes_validate.validate(obj, "1.33", strict=True)
    assert yaml.safe_load(DEPLOY.read_text().split("---")[1])["kind"] == "Namespace"
