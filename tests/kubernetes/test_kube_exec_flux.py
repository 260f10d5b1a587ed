"""`minicluster exec NAME -- flux ...` on Kubernetes: the container's PATH has no `flux` (only the entrypoint
adds the broker bundle or the flux-core view), so a bare `flux` runs as the pod's broker's `flux` at its socket,
first on the container's own PATH and with the view's libraries for flux-core's, as on the local backend. Found on
the real cluster: `env: 'flux': No such file or directory`, then `libarchive.so.13: cannot open shared object
file`, then `flux: 'resource' is not a flux command` (flux-core finds its Python commands only with the view's
python3 on PATH)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from miniclusters.api.spec import MiniCluster
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.backends.kubernetes.lead import LEAD_RUNDIR, flux_command
from miniclusters.backends.pod_flux import SYSTEM_PATH
from miniclusters.render.layout import BROKER_INSTALL_DIR
from miniclusters.testing.fake_kube import FakeKube


def _flux_flavour(mc: MiniCluster, mount_path: str | None = None) -> MiniCluster:
    flux = mc.spec.flux.model_copy(update={"flavour": "flux"})
    if mount_path:
        flux = flux.model_copy(update={"container": flux.container.model_copy(update={"mount_path": mount_path})})
    return mc.model_copy(update={"spec": mc.spec.model_copy(update={"flux": flux})})


def _sent(fake: FakeKube) -> list[str]:
    return [c for c in fake.calls if c.verb == "exec"][-1].body


def test_bare_flux_runs_the_brokers_flux_at_its_socket(fake: FakeKube, backend: KubernetesBackend, make_mc) -> None:
    backend.create(make_mc())
    backend.exec("demo", 1, ["flux", "resource", "list"])
    argv = _sent(fake)
    assert argv[:2] == ["sh", "-c"] and argv[3] == LEAD_RUNDIR
    # the bundle last on PATH, as job-exec puts it: its python3 must not shadow the image's in submitted jobs
    path = f'export PATH="${{PATH:-{SYSTEM_PATH}}}:{BROKER_INSTALL_DIR}/bin"; exec "$@"'
    assert argv[4:] == ["env", "sh", "-c", path, "sh", f"{BROKER_INSTALL_DIR}/bin/flux", "resource", "list"]


def test_the_flux_flavour_uses_the_views_flux_with_the_views_libraries(
    fake: FakeKube, backend: KubernetesBackend, make_mc
) -> None:
    """The entrypoint exports the view's LD_LIBRARY_PATH for flux-broker; an exec'd command gets the image's own
    environment, and the application image need not have libarchive: found on the real cluster (the wait for an
    interactive flux-flavour cluster's brokers ran a `flux` that could not load)."""
    mc = _flux_flavour(make_mc())
    backend.create(mc)
    backend.exec("demo", 0, ["flux", "jobs"])
    view = f"{mc.spec.flux.container.mount_path}/view"
    assert _sent(fake)[4:6] == ["env", f"LD_LIBRARY_PATH={view}/lib"]
    assert _sent(fake)[-2:] == ["flux", "jobs"]  # the view's, first on PATH


def test_the_command_runs_the_views_flux_first_on_the_images_own_path(tmp_path: Path, make_mc) -> None:
    """Run as the pod runs it, with a stand-in view: the view's bin comes first (its python3 is what flux-core's
    Python commands run with), the image's PATH stays after it (a job submitted from here inherits it), the view's
    libraries are set, and a container without PATH gets the usual one."""
    bin_dir = tmp_path / "view" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "flux").write_text('#!/bin/sh\necho "$PATH|$LD_LIBRARY_PATH|$*"\n')
    (bin_dir / "flux").chmod(0o755)
    argv = flux_command(_flux_flavour(make_mc(), str(tmp_path)), ["resource", "list"])
    ran = subprocess.run(argv, env={"PATH": "/opt/app/bin:/usr/bin:/bin"}, capture_output=True, text=True, check=True)
    assert ran.stdout == f"{bin_dir}:/opt/app/bin:/usr/bin:/bin|{tmp_path}/view/lib|resource list\n"
    bare = subprocess.run(["/usr/bin/env", *argv[1:]], env={}, capture_output=True, text=True, check=True)
    assert bare.stdout.split("|")[0] == f"{bin_dir}:{SYSTEM_PATH}"


def test_other_commands_are_sent_as_given(fake: FakeKube, backend: KubernetesBackend, make_mc) -> None:
    backend.create(make_mc())
    backend.exec("demo", 0, ["hostname"])
    assert _sent(fake) == ["hostname"]
