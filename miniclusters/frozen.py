"""The broker image's one frozen executable (a PyInstaller bundle), which is several commands at once.

The bundle under /opt/miniclusters/env holds one program and, in env/bin, the names it answers to: `flux` (our
built-in broker's CLI), `minicluster` and `python3`. Code all over the tree starts helpers as
`[sys.executable, "-m", "broker.subinstance", ...]`, finds `flux` beside `sys.executable`, and the rendered
entrypoint runs `$MINICLUSTER_BROKER_DIR/bin/python3 -m bursting.service`: so, frozen, `sys.executable` is made
env/bin/python3 and that name understands the interpreter's own command line (-m MODULE, -c CODE, SCRIPT),
running the bundled modules. One executable for all three saves the space and build time of three bundles.

This module runs first in every bundled process (each `flux` command in a pod), so it imports only what the
bundle's bootstrap has already loaded (os, sys): no typing, dataclasses, pathlib or runpy, which would cost a
`flux run` in the bundle 10-20 ms more (the lean job CLI itself avoids typing, re and enum).
"""

from __future__ import annotations

import os
import sys

from miniclusters.errors import MiniclustersError

PYTHON_VERSION = "{}.{}.{}".format(*sys.version_info[:3])
# The interpreter's one-letter options that take no value (-I, -S, -u, ...): accepted and mostly ignored, since
# a frozen program has no site directories or environment-driven start-up to skip.
NO_VALUE_FLAGS = frozenset("bBdEiIOPqsSuvVx")
VALUE_FLAGS = frozenset("WX")


class UsageError(MiniclustersError):
    """An interpreter command line this front end cannot run (it says what is missing, like python3 does)."""


class Invocation:
    """What `python3 ARGS` asked for: run a module, a code string, a script, or print the version."""

    __slots__ = ("args", "flags", "kind", "target")

    def __init__(
        self, kind: str, target: str = "", args: tuple[str, ...] = (), flags: frozenset[str] = frozenset()
    ) -> None:
        self.kind = kind  # "module", "code", "script", "version"
        self.target = target
        self.args = args
        self.flags = flags

    def _fields(self) -> tuple[str, str, tuple[str, ...], frozenset[str]]:
        return (self.kind, self.target, self.args, self.flags)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Invocation) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"Invocation{self._fields()!r}"


def parse_interpreter_args(argv: list[str]) -> Invocation:
    """Split a python3 command line (without argv[0]) as CPython does: options, then -m/-c/SCRIPT, then args."""
    flags: set[str] = set()
    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        if arg == "--version":
            return Invocation("version")
        if arg == "--":
            break
        if arg == "-" or not arg.startswith("-"):
            return Invocation("script", arg, tuple(argv[index:]), frozenset(flags))
        letters = arg[1:]
        for position, letter in enumerate(letters):
            rest = letters[position + 1 :]
            if letter in ("m", "c"):
                if rest:
                    target = rest
                elif index < len(argv):
                    target = argv[index]
                    index += 1
                else:
                    raise UsageError(f"Argument expected for the -{letter} option")
                return Invocation("module" if letter == "m" else "code", target, tuple(argv[index:]), frozenset(flags))
            if letter in VALUE_FLAGS:
                if not rest:
                    if index >= len(argv):
                        raise UsageError(f"Argument expected for the -{letter} option")
                    index += 1
                break
            if letter not in NO_VALUE_FLAGS:
                raise UsageError(f"Unknown option: -{letter}")
            if letter == "V":
                return Invocation("version")
            flags.add(letter)
    if index < len(argv):
        return Invocation("script", argv[index], tuple(argv[index + 1 :]), frozenset(flags))
    raise UsageError("no interactive interpreter in this bundle: give -m MODULE, -c CODE or a SCRIPT")


def command_for(program: str) -> str:
    """Which command a name stands for: `flux`, `minicluster`, anything else is the interpreter."""
    name = os.path.basename(program)
    return name if name in ("flux", "minicluster") else "python3"


def run_interpreter(argv: list[str]) -> None:
    """Behave as `python3 argv...` for the modules inside the bundle (PYTHONPATH adds more, unless -E/-I)."""
    invocation = parse_interpreter_args(argv)
    if invocation.kind == "version":
        print(f"Python {PYTHON_VERSION}")
        return
    if "u" in invocation.flags or os.environ.get("PYTHONUNBUFFERED"):
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(write_through=True)  # type: ignore[union-attr]
    if not invocation.flags & {"E", "I"}:
        extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[0:0] = extra
    if invocation.kind == "module":
        import runpy

        sys.argv = [invocation.target, *invocation.args]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(invocation.target, run_name="__main__", alter_sys=True)
    elif invocation.kind == "code":
        sys.argv = ["-c", *invocation.args]
        sys.path.insert(0, "")
        exec(compile(invocation.target, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    else:
        script = invocation.target
        sys.argv = [script, *invocation.args]
        if script == "-":
            exec(compile(sys.stdin.read(), "<stdin>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
            return
        import runpy

        sys.path.insert(0, os.path.dirname(os.path.realpath(script)))
        runpy.run_path(script, run_name="__main__")


class MatplotlibConfigDir:
    """Gives matplotlib a private temporary MPLCONFIGDIR when it is first imported, and removes it at exit.

    PyInstaller's run-time hook did this at the start of every bundled process, matplotlib or not (the spec drops
    it). Without one, in a pod whose HOME is not writable (uid 65532, HOME=/), matplotlib warns at each import
    that it made a temporary cache directory. Stays out of the way (returns no spec) and removes itself."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name != "matplotlib":
            return None
        sys.meta_path.remove(self)
        if "MPLCONFIGDIR" not in os.environ:
            import atexit
            import shutil
            import tempfile

            directory = tempfile.mkdtemp(prefix="matplotlib-")
            os.environ["MPLCONFIGDIR"] = directory
            atexit.register(shutil.rmtree, directory, ignore_errors=True)
        return None


def add_extras(bundle: str) -> None:
    """Put the bundle's extras (numpy, matplotlib, the Kubernetes client: plain files in env/extras, see
    images/broker/bundle_parts.py) at the end of sys.path where they were installed: always in the image (the
    operator), in a pod only when its init container copied them (`install.sh DEST --with-extras`)."""
    extras = os.path.join(bundle, "extras")
    if os.path.isdir(extras):
        sys.path.append(extras)


def main() -> None:
    """The bundle's entry point (images/broker/bundle.py): dispatch on the name it was run as."""
    command = command_for(sys.argv[0])
    if getattr(sys, "frozen", False):
        # helpers are started as sys.executable -m ...: make that this bundle's python3, beside flux
        bundle = os.path.dirname(getattr(sys, "_MEIPASS", os.path.dirname(sys.executable)))
        sys.executable = os.path.join(bundle, "bin", "python3")
        add_extras(bundle)
        sys.meta_path.insert(0, MatplotlibConfigDir())
    if command == "flux":
        from broker.cli.flux import main as flux_main

        sys.argv[0] = "flux"
        flux_main()
    elif command == "minicluster":
        from miniclusters.cli import main as minicluster_main

        sys.argv[0] = "minicluster"
        minicluster_main()
    else:
        try:
            run_interpreter(sys.argv[1:])
        except UsageError as error:
            print(f"python3: {error}", file=sys.stderr)
            sys.exit(2)
