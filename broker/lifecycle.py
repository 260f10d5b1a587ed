"""The broker process's life: its run directory, the signal pipe, the initial program, shutdown and close hooks.

:class:`Lifecycle` is a part of the broker, composed into it (not inherited): it alone owns the broker's state word
(join, quorum, run, shutdown), its exit code, the run directory it made, the signal pipe, the initial program's
process, and the hooks that run at close. It reaches the tree only through :class:`TreeControl` (tell the
children to shut down, leave the parent), which tree_link.TreeLink provides.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Protocol

from .attributes import Attributes
from .loop import Loop, Timer
from .options import SHUTDOWN_GRACE, log_line
from .tempdir import make_rundir


class TreeControl(Protocol):
    """What shutdown asks of the broker's place in the tree (tree_link.TreeLink)."""

    def connected_children(self) -> list[int]: ...

    def shutdown_children(self, reason: str) -> bool:
        """Tell every connected child to shut down; whether there was one."""
        ...

    def leave_parent(self) -> None:
        """Say goodbye to the parent and close the link to it (rank > 0)."""
        ...


class Lifecycle:
    """The broker process's state, initial program and shutdown (see the module docstring)."""

    def __init__(
        self, rank: int, loop: Loop, attrs: Attributes, command: list[str], verbose: bool, handle_sigint: bool
    ) -> None:
        self._rank = rank
        self._loop = loop
        self._attrs = attrs
        self._argv = command
        self._verbose = verbose
        self._handle_sigint = handle_sigint
        self._tree: TreeControl | None = None
        self._state = "join" if rank > 0 else "quorum"
        self._exit_code = 0
        self._rundir = ""
        self._created_rundir = False
        self._close_hooks: list[Callable[[], None]] = []
        self._command: subprocess.Popen[bytes] | None = None
        self._command_fd: int | None = None
        self._shutdown_timer: Timer | None = None
        self._finishing = False
        self._signal_r = -1
        self._signal_w = -1
        self._pending_signals: list[int] = []

    def attach(self, tree: TreeControl) -> None:
        """The tree part, made after this one (it asks this part to shut down, finish, start the program)."""
        self._tree = tree

    # ------------------------------------------------------------------ what others read
    @property
    def state(self) -> str:
        return self._state

    @property
    def exit_code(self) -> int:
        return self._exit_code

    @property
    def rundir(self) -> str:
        return self._rundir

    @property
    def local_uri(self) -> str:
        return f"local://{self._rundir}/local"

    def set_state(self, state: str) -> None:
        """The broker moves to `state` (join, quorum, run); `shutdown` moves it to shutdown."""
        self._state = state

    def set_exit_code(self, code: int) -> None:
        self._exit_code = code

    def on_close(self, callback: Callable[[], None]) -> None:
        """Run `callback` when the broker closes (modules stop their processes, flush their files)."""
        self._close_hooks.append(callback)

    def _debug(self, text: str) -> None:
        if self._verbose:
            log_line(self._rank, text)

    # ------------------------------------------------------------------ run directory and signals
    def init_rundir(self) -> None:
        rundir = self._attrs.get("rundir")
        if rundir:
            os.makedirs(rundir, mode=0o700, exist_ok=True)  # not pathlib: 2,048 forked brokers copy what they touch
            self._rundir = rundir
        else:
            self._rundir = make_rundir()
            self._created_rundir = True

    def install_signals(self) -> None:
        self._signal_r, self._signal_w = os.pipe()
        os.set_blocking(self._signal_w, False)
        os.set_blocking(self._signal_r, False)
        signal.set_wakeup_fd(self._signal_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGTERM, self._on_signal)
        if self._handle_sigint:
            signal.signal(signal.SIGINT, self._on_signal)
        self._loop.add_reader(self._signal_r, self._drain_signals)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._pending_signals.append(signum)

    def _drain_signals(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._signal_r, 512)
        while self._pending_signals:
            signum = self._pending_signals.pop()
            self._debug(f"signal {signum}: shutting down")
            self.shutdown(f"signal {signum}")

    # ------------------------------------------------------------------ close
    def run_close_hooks(self) -> None:
        """The modules' hooks, then the initial program killed if it still runs."""
        hooks, self._close_hooks = self._close_hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception as exc:  # one module's failure must not stop the others' clean-up
                log_line(self._rank, f"close hook failed: {exc!r}")
        if self._command is not None and self._command.poll() is None:
            self._signal_command(signal.SIGKILL)

    def release(self) -> None:
        """After the sockets closed: the signal pipe, and the run directory this broker made."""
        if self._signal_w >= 0:
            signal.set_wakeup_fd(-1)
            os.close(self._signal_w)
            os.close(self._signal_r)
            self._signal_w = self._signal_r = -1
        if self._created_rundir and self._rundir:
            import shutil  # at the end only: shutil imports zlib, bz2 and lzma (issue 45, an idle broker's memory)

            shutil.rmtree(self._rundir, ignore_errors=True)
            self._created_rundir = False

    # ------------------------------------------------------------------ the initial program
    def start_command(self) -> None:
        """Once online: run the initial program, if there is one (`broker.rc2_none` says there is none)."""
        if not self._argv or self._attrs.get("broker.rc2_none"):  # flux-core's "no initial program"
            return
        env = dict(os.environ, FLUX_URI=self.local_uri)
        bindir = os.path.dirname(sys.executable)  # where the `flux` console script is installed
        if not on_path("flux", env.get("PATH")) and os.path.exists(os.path.join(bindir, "flux")):
            env.update(PATH=bindir + os.pathsep + env.get("PATH", ""))
        try:
            # its own process group, so shutdown reaches everything the program started
            self._command = subprocess.Popen(self._argv, env=env, process_group=0)
        except OSError as exc:
            log_line(self._rank, f"{self._argv[0]}: {exc.strerror or exc}")
            self._exit_code = 127 if isinstance(exc, FileNotFoundError) else 126
            self.shutdown("initial program failed to start")
            return
        self._command_fd = os.pidfd_open(self._command.pid)
        self._loop.add_reader(self._command_fd, self._on_command_exit)

    def _on_command_exit(self) -> None:
        assert self._command is not None and self._command_fd is not None
        code = self._command.wait()
        self._loop.remove_reader(self._command_fd)
        os.close(self._command_fd)
        self._command_fd = None
        self._exit_code = 128 - code if code < 0 else code
        self._debug(f"initial program exited with {self._exit_code}")
        self._command = None
        if self._state == "shutdown":
            self._shutdown_children("instance shutdown")
        else:
            self.shutdown("initial program exited")

    def _signal_command(self, signum: int) -> None:
        if self._command is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._command.pid, signum)

    def _kill_command(self) -> None:
        if self._command is not None and self._command.poll() is None:
            self._signal_command(signal.SIGKILL)

    # ------------------------------------------------------------------ shutdown
    def shutdown(self, reason: str) -> None:
        """Shut this broker and its subtree down: stop the initial program, tell children, say goodbye."""
        if self._state == "shutdown":
            return
        self._state = "shutdown"
        self._debug(f"shutdown: {reason}")
        if self._command is not None and self._command.poll() is None:
            self._signal_command(signal.SIGTERM)
            self._loop.call_later(SHUTDOWN_GRACE, self._kill_command)
            return  # _on_command_exit continues with the children
        self._shutdown_children(reason)

    def _shutdown_children(self, reason: str) -> None:
        assert self._tree is not None
        if not self._tree.shutdown_children(reason):
            self.finish()
        else:
            self._shutdown_timer = self._loop.call_later(SHUTDOWN_GRACE, self.finish)

    def maybe_finish_shutdown(self) -> None:
        assert self._tree is not None
        if self._state == "shutdown" and not self._tree.connected_children() and self._command is None:
            self.finish()

    def finish(self) -> None:
        if self._finishing:
            return
        self._finishing = True
        assert self._tree is not None
        self._tree.leave_parent()
        self._loop.stop()


def on_path(name: str, path: str | None) -> bool:
    """Whether shutil.which(name, path=path) finds an executable (a bare name), without importing shutil."""
    if path == "":
        return False  # as shutil.which: an empty PATH finds nothing
    for directory in (os.defpath if path is None else path).split(os.pathsep):
        candidate = os.path.join(directory, name)
        if os.path.exists(candidate) and os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return True
    return False
