"""`minicluster exec NAME -- flux ...` on Kubernetes: the container's PATH has no `flux` (only the entrypoint
adds the broker bundle or the flux-core view), so a bare `flux` runs as the pod's broker's `flux` at its socket,
with the view's libraries for flux-core's, as on the local backend. Found on the real cluster: `env: 'flux': No
such file or directory`, then `libarchive.so.13: cannot open shared object file`."""

from __future__ import annotations

from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.backends.kubernetes.lead import LEAD_RUNDIR
from miniclusters.render.layout import BROKER_INSTALL_DIR
from miniclusters.testing.fake_kube import FakeKube


def _sent(fake: FakeKube) -> list[str]:
    return [c for c in fake.calls if c.verb == "exec"][-1].body


def test_bare_flux_runs_the_brokers_flux_at_its_socket(fake: FakeKube, backend: KubernetesBackend, make_mc) -> None:
    backend.create(make_mc())
    backend.exec("demo", 1, ["flux", "resource", "list"])
    argv = _sent(fake)
    assert argv[:2] == ["sh", "-c"] and argv[3] == LEAD_RUNDIR
    assert argv[4:] == ["env", f"{BROKER_INSTALL_DIR}/bin/flux", "resource", "list"]


def test_the_flux_flavour_uses_the_views_flux_with_the_views_libraries(
    fake: FakeKube, backend: KubernetesBackend, make_mc
) -> None:
    """The entrypoint exports the view's LD_LIBRARY_PATH for flux-broker; an exec'd command gets the image's own
    environment, and the application image need not have libarchive: found on the real cluster (the wait for an
    interactive flux-flavour cluster's brokers ran a `flux` that could not load)."""
    mc = make_mc()
    mc = mc.model_copy(
        update={"spec": mc.spec.model_copy(update={"flux": mc.spec.flux.model_copy(update={"flavour": "flux"})})}
    )
    backend.create(mc)
    backend.exec("demo", 0, ["flux", "jobs"])
    view = f"{mc.spec.flux.container.mount_path}/view"
    assert _sent(fake)[4:] == ["env", f"LD_LIBRARY_PATH={view}/lib", f"{view}/bin/flux", "jobs"]


def test_other_commands_are_sent_as_given(fake: FakeKube, backend: KubernetesBackend, make_mc) -> None:
    backend.create(make_mc())
    backend.exec("demo", 0, ["hostname"])
    assert _sent(fake) == ["hostname"]
