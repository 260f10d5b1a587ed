"""One broker process: joins the tree overlay, tracks membership, routes RPCs and events, runs the initial program.

Everything happens on one thread in a small poll loop (loop.py); modules such as the job manager plug in by
registering services (`Broker.register`), sending RPCs (`Broker.rpc`) and publishing/subscribing to events.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import zmq

from common import idset

from .broker_core import (  # re-exported: modules and the CLI import them from here
    SHUTDOWN_GRACE,
    BrokerCore,
    BrokerError,
    BrokerOptions,
    EventCallback,
    Module,
    ResponseCallback,
    StartRefused,
    _log,
)
from .builtin_services import BuiltinServices
from .curve_cert import CurveCertError, load_zcert
from .errors import InputError
from .membership import UP
from .overlay import Overlay, OverlayError
from .protocol import (
    control,
)
from .refused import EXIT_REFUSED, refusal_line
from .resources import local_resources
from .tree_link import TreeLink

__all__ = [
    "Broker",
    "BrokerCore",
    "BrokerError",
    "BrokerOptions",
    "EventCallback",
    "Module",
    "ResponseCallback",
    "run_broker",
]


class Broker(BrokerCore):
    """A broker of the instance described by the bootstrap config, at the rank its hostname selects."""

    def __init__(self, options: BrokerOptions) -> None:
        super().__init__(options)
        self.tree = TreeLink(self)

    def setup(self) -> None:
        """Load the certificate, bind and connect sockets. Raises BrokerError; cleans up after itself."""
        try:
            self._setup()
        except BrokerError:
            self.close()
            raise

    def _setup(self) -> None:
        cert = self.options.cert
        if self.size > 1 and cert is None:
            assert self.config.curve_cert is not None
            try:
                cert = load_zcert(self.config.curve_cert)
            except CurveCertError as exc:
                raise BrokerError(f"curve certificate: {exc}") from None
        self.resources = local_resources(self.rank, self.hostname or "")
        cores = self.attrs.get("resource.cores")
        if cores:  # a sub-instance owns only the cores its parent allocated to it
            try:
                ids = idset.decode(cores)
            except idset.IdsetError as exc:
                raise BrokerError(f"attribute resource.cores: {exc}") from None
            self.resources.update(cores=idset.encode(ids), ncores=len(ids))
        self._init_rundir()
        if not self.attrs.get("statedir"):
            self.attrs.set("statedir", f"{self.rundir}/state")
        self.ctx = zmq.Context()
        self.overlay = Overlay(self.ctx, self.rank, cert)
        self.client_sock = self.ctx.socket(zmq.ROUTER)
        self.client_sock.setsockopt(zmq.LINGER, 0)
        self.client_sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        # No send limit: a client that pipelines thousands of requests before reading (`flux submit --cc`) must get
        # every answer. At zmq's default of 1,000 queued messages ROUTER_MANDATORY refuses the send with EAGAIN and
        # the answer (a job id whose job was accepted) was lost. flux-core's local connector queues without limit.
        self.client_sock.setsockopt(zmq.SNDHWM, 0)
        try:
            self.client_sock.bind(f"ipc://{self.rundir}/local")
        except zmq.ZMQError as exc:
            raise BrokerError(f"cannot bind local client socket {self.rundir}/local: {exc.strerror}") from None
        if self.child_ranks:
            uri = self.config.bind_uri(self.rank)
            if uri is None:
                raise BrokerError(
                    f"{self.config.source}: rank {self.rank} ({self.hostname}) has children but no bind URI "
                    "(set [bootstrap] default_bind or hosts[].bind)"
                )
            try:
                bound = self.overlay.bind_children(uri)
            except OverlayError as exc:
                raise BrokerError(str(exc)) from None
            self.attrs.set("tbon.endpoint", bound)
        if self.rank > 0:
            uri = self.config.connect_uri(self.parent_rank)
            if uri is None:
                raise BrokerError(
                    f"{self.config.source}: no connect URI for parent rank {self.parent_rank} "
                    "(set [bootstrap] default_connect or hosts[].connect)"
                )
            self.attrs.set("tbon.parent-endpoint", uri)
        self._set_attributes()
        BuiltinServices(self)
        self.bursts.register_services()
        for module in self.options.modules:
            try:
                module(self)
            except (OSError, InputError) as exc:  # a path it cannot use, a setting it refuses: one clear line
                name = getattr(module, "__name__", "module").replace("_", "-")
                detail = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) and exc.filename else exc
                raise BrokerError(f"{name}: {detail}") from None
        self.membership.set(self.rank, UP, resources=self.resources, uuid=self.uuid)
        self.loop.add_reader(self.client_sock, self.router.on_client)
        if self.overlay.child_sock is not None:
            self.loop.add_reader(self.overlay.child_sock, self.tree.on_children)
        if self.overlay.zap_sock is not None:
            self.loop.add_reader(self.overlay.zap_sock, self.overlay.handle_zap)
        if self.rank > 0:
            self.tree.connect_parent()
        self.loop.call_every(self.hb_interval, self.tree.heartbeat)
        self.loop.call_every(max(0.01, min(self.hb_interval, self.hb_timeout / 10)), self.tree.check_liveness)
        self._install_signals()
        if self.rank == 0:
            self.tree.check_quorum()

    def _init_rundir(self) -> None:
        rundir = self.attrs.get("rundir")
        if rundir:
            Path(rundir).mkdir(parents=True, exist_ok=True, mode=0o700)
            self.rundir = rundir
        else:
            self.rundir = tempfile.mkdtemp(prefix="flux-")
            self._created_rundir = True

    def _set_attributes(self) -> None:
        self.attrs.set("rank", self.rank)
        self.attrs.set("size", self.size)
        self.attrs.set("hostlist", self.config.hostlist())
        self.attrs.set("hostname", self.hostname)
        self.attrs.set("local-uri", self.local_uri)
        self.attrs.set("rundir", self.rundir)
        self.attrs.set("tbon.topo", self.topology.name)
        self.attrs.set("tbon.parent", self.parent_rank)
        self.attrs.set("tbon.level", self.topology.depth(self.rank))
        self.attrs.set("broker.quorum", self.quorum.count if not self.quorum.ranks else idset.encode(self.quorum.ranks))
        self.attrs.set("broker.pid", os.getpid())
        self.attrs.set("broker.starttime", f"{self.starttime:.3f}")
        if "instance-level" not in self.attrs:
            self.attrs.set("instance-level", 0)
        self.attrs.set("version", "0.88.0-miniclusters")

    def _install_signals(self) -> None:
        self._signal_r, self._signal_w = os.pipe()
        os.set_blocking(self._signal_w, False)
        os.set_blocking(self._signal_r, False)
        signal.set_wakeup_fd(self._signal_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGTERM, self._on_signal)
        if self.options.handle_sigint:
            signal.signal(signal.SIGINT, self._on_signal)
        self.loop.add_reader(self._signal_r, self._drain_signals)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._pending_signals.append(signum)

    def _drain_signals(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._signal_r, 512)
        while self._pending_signals:
            signum = self._pending_signals.pop()
            self.debug(f"signal {signum}: shutting down")
            self.shutdown(f"signal {signum}")

    def run(self) -> int:
        """Run until the broker exits; return its exit code."""
        try:
            self.loop.run()
        finally:
            self.close()
        return self.exit_code

    def close(self) -> None:
        hooks, self._close_hooks = self._close_hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception as exc:  # one module's failure must not stop the others' clean-up
                _log(self.rank, f"close hook failed: {exc!r}")
        if self._command is not None and self._command.poll() is None:
            self._signal_command(signal.SIGKILL)
        if self.overlay is not None:
            self.overlay.close()
        if self.client_sock is not None:
            self.client_sock.close(0)
            self.client_sock = None
            with contextlib.suppress(OSError):
                os.unlink(f"{self.rundir}/local")
        if self.ctx is not None:
            self.ctx.term()
            self.ctx = None
        if self._signal_w >= 0:
            signal.set_wakeup_fd(-1)
            os.close(self._signal_w)
            os.close(self._signal_r)
            self._signal_w = self._signal_r = -1
        if self._created_rundir and self.rundir:
            shutil.rmtree(self.rundir, ignore_errors=True)
            self._created_rundir = False

    def start_command(self) -> None:
        env = dict(os.environ, FLUX_URI=self.local_uri)
        bindir = os.path.dirname(sys.executable)  # where the `flux` console script is installed
        if shutil.which("flux", path=env.get("PATH")) is None and os.path.exists(os.path.join(bindir, "flux")):
            env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        try:
            # its own process group, so shutdown reaches everything the program started
            self._command = subprocess.Popen(self.options.command, env=env, process_group=0)
        except OSError as exc:
            _log(self.rank, f"{self.options.command[0]}: {exc.strerror or exc}")
            self.exit_code = 127 if isinstance(exc, FileNotFoundError) else 126
            self.shutdown("initial program failed to start")
            return
        self._command_fd = os.pidfd_open(self._command.pid)
        self.loop.add_reader(self._command_fd, self._on_command_exit)

    def _on_command_exit(self) -> None:
        assert self._command is not None and self._command_fd is not None
        code = self._command.wait()
        self.loop.remove_reader(self._command_fd)
        os.close(self._command_fd)
        self._command_fd = None
        self.exit_code = 128 - code if code < 0 else code
        self.debug(f"initial program exited with {self.exit_code}")
        self._command = None
        if self.state == "shutdown":
            self._shutdown_children("instance shutdown")
        else:
            self.shutdown("initial program exited")

    def shutdown(self, reason: str) -> None:
        """Shut this broker and its subtree down: stop the initial program, tell children, say goodbye."""
        if self.state == "shutdown":
            return
        self.state = "shutdown"
        self.debug(f"shutdown: {reason}")
        if self._command is not None and self._command.poll() is None:
            self._signal_command(signal.SIGTERM)
            self.loop.call_later(SHUTDOWN_GRACE, self._kill_command)
            return  # _on_command_exit continues with the children
        self._shutdown_children(reason)

    def _signal_command(self, signum: int) -> None:
        if self._command is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._command.pid, signum)

    def _kill_command(self) -> None:
        if self._command is not None and self._command.poll() is None:
            self._signal_command(signal.SIGKILL)

    def _shutdown_children(self, reason: str) -> None:
        assert self.overlay is not None
        children = self.tree.connected_children()
        for rank in children:
            self.overlay.send_child(rank, control("overlay.shutdown", {"reason": reason}, sender=self.rank))
        if not children:
            self.finish()
        else:
            self._shutdown_timer = self.loop.call_later(SHUTDOWN_GRACE, self.finish)

    def maybe_finish_shutdown(self) -> None:
        if self.state == "shutdown" and not self.tree.connected_children() and self._command is None:
            self.finish()

    def finish(self) -> None:
        if self._finishing:
            return
        self._finishing = True
        assert self.overlay is not None
        if self.rank > 0 and self.overlay.parent_sock is not None:
            self.overlay.send_parent(control("overlay.goodbye", sender=self.rank))
            self.loop.remove_reader(self.overlay.parent_sock)
            self.tree.stop_watching_parent()
            self.overlay.close_parent(linger_ms=500)
        self.loop.stop()


def run_broker(options: BrokerOptions) -> int:
    """Start a broker and run it to completion; start-up problems print one clear line and return 1."""
    try:
        broker = Broker(options)
        broker.setup()
    except StartRefused as exc:
        print(refusal_line(str(exc)), file=sys.stderr, flush=True)
        return EXIT_REFUSED
    except BrokerError as exc:
        print(f"flux-broker: {exc}", file=sys.stderr, flush=True)
        return 1
    return broker.run()
