"""`make kube`'s go.mod: every staging replace comes from the release's own go.mod, none hand-copied."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from miniclusters.localkube.layout import KUBE_VERSION

ROOT = Path(__file__).resolve().parents[2]
GOMOD = ROOT / "kube" / "gomod.py"

KUBERNETES_GO_MOD = """module k8s.io/kubernetes

go 1.26.0

require (
\tgithub.com/blang/semver/v4 v4.0.0
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/cri-api => ./staging/src/k8s.io/cri-api
\tgithub.com/some/fork => github.com/other/fork v1.2.3
)
"""


def _render(version: str, text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "kubernetes.mod"
    source.write_text(text)
    return subprocess.run(
        [sys.executable, str(GOMOD), version, str(source)], capture_output=True, text=True, check=False
    )


def test_each_staging_module_points_at_its_published_release(tmp_path: Path) -> None:
    made = _render("v1.37.2", KUBERNETES_GO_MOD, tmp_path)
    assert made.returncode == 0, made.stderr
    replaces = re.findall(r"^\t(\S+) => (\S+) (\S+)$", made.stdout, re.M)
    assert replaces == [
        ("k8s.io/api", "k8s.io/api", "v0.37.2"),
        ("k8s.io/client-go", "k8s.io/client-go", "v0.37.2"),
        ("k8s.io/cri-api", "k8s.io/cri-api", "v0.37.2"),
    ]
    assert "require k8s.io/kubernetes v1.37.2" in made.stdout
    assert "go 1.26.0" in made.stdout
    assert "github.com/other/fork" not in made.stdout  # only staging folders are rewritten


@pytest.mark.parametrize("version", ["1.37.2", "v1.37", "v2.0.0", "v1.37.2-rc.1"])
def test_a_version_that_is_not_a_release_is_refused(version: str, tmp_path: Path) -> None:
    made = _render(version, KUBERNETES_GO_MOD, tmp_path)
    assert made.returncode == 1
    assert "KUBE_VERSION" in made.stderr and not made.stdout


def test_a_go_mod_without_staging_is_refused(tmp_path: Path) -> None:
    made = _render("v1.37.2", "module example.com/x\n\ngo 1.26\n", tmp_path)
    assert made.returncode == 1
    assert "staging" in made.stderr


def test_the_makefile_and_the_cli_pin_one_release() -> None:
    pinned = re.search(r"^KUBE_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned and pinned.group(1) == KUBE_VERSION
