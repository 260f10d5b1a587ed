"""One root per package: every exception class the broker package defines is a BrokerBaseError of one kind
and keeps the builtin base it had (so existing `except ValueError` / `except RuntimeError` still catch it); the
elasticity, miniclusters and bursting packages each have their root too."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import broker
import bursting
from broker.errors import BrokerBaseError, BrokerFailure, FluxError, InputError


def _exceptions(package: object) -> dict[str, type[Exception]]:
    """Errors (not signals such as a KeyboardInterrupt subclass) defined in the package's modules."""
    found = {}
    path = package.__path__  # type: ignore[attr-defined]
    for info in pkgutil.walk_packages(path, prefix=f"{package.__name__}."):  # type: ignore[attr-defined]
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, Exception) and value.__module__ == info.name:
                found[f"{info.name}.{name}"] = value
    return found


def test_every_broker_exception_has_the_one_root() -> None:
    classes = _exceptions(broker)
    assert len(classes) > 30
    assert [name for name, cls in classes.items() if not issubclass(cls, BrokerBaseError)] == []


@pytest.mark.parametrize(
    ("name", "kind", "builtin"),
    [
        ("broker.jobs.build.JobspecError", InputError, ValueError),
        ("broker.attributes.AttrError", InputError, ValueError),
        ("broker.jobs.archive_members.ArchiveError", InputError, ValueError),
        ("broker.modules.exec_request.ExecRequestError", InputError, ValueError),
        ("broker.options.BrokerError", BrokerFailure, RuntimeError),
        ("broker.options.StartRefused", BrokerFailure, RuntimeError),
        ("broker.jobs.journal.JournalError", BrokerFailure, RuntimeError),
        ("broker.errors.FluxError", BrokerBaseError, OSError),
    ],
)
def test_kinds_keep_their_builtin_base(name: str, kind: type, builtin: type) -> None:
    cls = _exceptions(broker)[name]
    assert issubclass(cls, kind) and issubclass(cls, builtin)


def test_catch_by_kind() -> None:
    from broker.attributes import Attributes

    with pytest.raises(InputError, match=r"sched\.queue-depth"):
        Attributes([("sched.queue-depth", "many")]).integer("sched.queue-depth", 1)
    error = FluxError(2, "unknown job id")
    assert isinstance(error, BrokerBaseError) and error.errno == 2 and str(error) == "unknown job id"


def test_every_bursting_exception_is_a_burst_error() -> None:
    from bursting.plugin import BurstError

    classes = _exceptions(bursting)
    assert [name for name, cls in classes.items() if not issubclass(cls, BurstError)] == []


def test_every_elasticity_and_miniclusters_exception_has_its_package_root() -> None:
    import elasticity
    import miniclusters
    from elasticity.control.ports import ActuatorError
    from elasticity.errors import ElasticityError
    from miniclusters.backends.base import BackendError
    from miniclusters.errors import MiniclustersError

    for package, root in ((elasticity, ElasticityError), (miniclusters, MiniclustersError)):
        classes = _exceptions(package)
        assert len(classes) >= 6
        assert [name for name, cls in classes.items() if not issubclass(cls, root)] == []
    # a backend's error is the product's, and what the decision layer's ports raise, so controllers catch it
    assert issubclass(BackendError, MiniclustersError) and issubclass(BackendError, ActuatorError)
