"""`check_crd` on a fresh apply: the real server serves a new CRD's resources a moment after the apply returns, so a
CRD object that exists is waited for (bounded); a missing one is said at once."""

from __future__ import annotations

import pytest

from miniclusters.backends.base import MissingAPIError
from miniclusters.backends.kubernetes.api import JOB
from miniclusters.backends.kubernetes.backend import KubernetesBackend
from miniclusters.testing.fake_kube import FakeKube


def test_missing_crd_is_said_at_once_not_after_a_wait(
    fake: FakeKube, backend: KubernetesBackend, clock, make_mc
) -> None:
    fake.crd_installed = False
    with pytest.raises(MissingAPIError):
        backend.create(make_mc())
    assert clock.slept == []  # no CustomResourceDefinition object: nothing to wait for


def test_a_crd_applied_a_moment_ago_is_waited_for_until_served(
    fake: FakeKube, backend: KubernetesBackend, clock, make_mc, monkeypatch
) -> None:
    """The real v1.37 server serves a new CRD's resources about a second after the apply returns."""
    from miniclusters.backends.kubernetes.api import CRD

    fake.crd_installed = False
    real_get = fake.get

    def get(kind, namespace, name):
        if kind == CRD:  # the object exists; its API is established once 2 s have passed
            if clock.slept and sum(clock.slept) >= 2:
                fake.crd_installed = True
            return {"metadata": {"name": name}}
        return real_get(kind, namespace, name)

    monkeypatch.setattr(fake, "get", get)
    backend.create(make_mc())
    assert 2 <= sum(clock.slept[:5]) <= 3
    assert fake.stored(JOB, "demo")
