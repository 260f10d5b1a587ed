"""`minicluster exec NAME -- flux ...` on Kubernetes: the container's PATH has no `flux` (only the entrypoint
adds the broker bundle or the flux-core view), so a bare `flux` runs as the pod's broker's `flux` at its socket,
as on the local backend. Found on the real cluster: `env: 'flux': No such file or directory`."""

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
    assert argv[4:] == [f"{BROKER_INSTALL_DIR}/bin/flux", "resource", "list"]


def test_the_flux_flavour_uses_the_views_flux(fake: FakeKube, backend: KubernetesBackend, make_mc) -> None:
    mc = make_mc()
    mc = mc.model_copy(
        update={"spec": mc.spec.model_copy(update={"flux": mc.spec.flux.model_copy(update={"flavour": "flux"})})}
    )
    backend.create(mc)
    backend.exec("demo", 0, ["flux", "jobs"])
    assert _sent(fake)[4:] == [f"{mc.spec.flux.container.mount_path}/view/bin/flux", "jobs"]


def test_other_commands_are_sent_as_given(fake: FakeKube, backend: KubernetesBackend, make_mc) -> None:
    backend.create(make_mc())
    backend.exec("demo", 0, ["hostname"])
    assert _sent(fake) == ["hostname"]
