"""Standard-library modules a broker process runs only when something calls into them.

Why: `dataclasses` imports `inspect`, which loads `ast`, `dis`, `tokenize` and their tables (about 0.8 MB of an
idle broker's resident memory, issue 45), yet calls it only to write a docstring for a dataclass that has none.
Every dataclass a broker defines has one (tests/broker/test_broker_lean_imports.py holds it), so with `inspect`
deferred an idle broker never runs it, and whatever does use it gets the real module, the same object.

Not importlib's LazyLoader: in Python 3.11 `import inspect` itself reads the module's `__spec__`, which makes
LazyLoader load it at once. Here the module object holds its spec from the start and runs its code into itself
on the first attribute it lacks.
"""

from __future__ import annotations

import _thread
import importlib.util
import sys
import types

DEFERRED = ("inspect", "pickle", "random", "ipaddress", "locale", "copy", "array")
"""inspect (dataclasses'); pickle and random (pyzmq's sugar, for send_pyobj and bind_to_random_port); ipaddress
(urllib.parse's, which pathlib imports); locale (subprocess's, for text mode); copy (dataclasses', for asdict and
replace); array (socket's, for passing descriptors): about 1 MB of an idle broker here, none of it run by one."""
PRESET: dict[str, dict[str, object]] = {"pickle": {"DEFAULT_PROTOCOL": 5 if sys.version_info >= (3, 14) else 4}}
"""Names read from a deferred module as its importer runs, given beforehand so that the read does not run it:
pyzmq's socket module reads pickle.DEFAULT_PROTOCOL (tests/broker/test_broker_lean_imports.py holds it true)."""
_LOADING = _thread.RLock()  # another thread waits for the code to have run; the running one reads what is there
_RUNNING: set[int] = set()


class DeferredModule(types.ModuleType):
    """A module whose code has not run yet: the first attribute it lacks runs it, and it becomes plain."""

    def __getattr__(self, attr: str) -> object:
        with _LOADING:
            if type(self) is DeferredModule and id(self) not in _RUNNING:
                _RUNNING.add(id(self))
                try:
                    self.__dict__["__spec__"].loader.exec_module(self)
                except Exception as exc:  # whatever the importer raised: the usual import instead
                    self._import_as_usual(exc)
                finally:
                    _RUNNING.discard(id(self))
                object.__setattr__(self, "__class__", types.ModuleType)
        try:
            return self.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}") from None

    def _import_as_usual(self, exc: Exception) -> None:
        """The fallback (one line on stderr): the module imported the usual way, its names copied here for
        whoever holds this object, and sys.modules given the real one."""
        name = self.__name__
        print(f"flux: deferred import of {name} failed ({exc!r}): imported it the usual way", file=sys.stderr)
        sys.modules.pop(name, None)
        real = importlib.import_module(name)
        self.__dict__.update(real.__dict__)


def defer(names: tuple[str, ...] = DEFERRED) -> None:
    """Install each module deferred unless it is loaded already; where its importer cannot run it into a given
    module (no exec_module, as in some frozen bundles), leave it to the usual import."""
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            continue
        module = importlib.util.module_from_spec(spec)
        module.__dict__.update(PRESET.get(name, {}))
        module.__class__ = DeferredModule
        sys.modules[name] = module
