"""`flux start --test-size=N`: N brokers on this machine, forked from one process that imported everything once.

Each broker gets its own hostname (<host>-<i>), its own loopback address 127.0.0.(i+1) and a free port, so the
instance exercises the same bootstrap/CURVE/TCP path as a real multi-node one. What every broker would compute
alike (the config's host views, the tree, this machine's resources) is computed once before forking, so the
brokers share those pages instead of each making an O(N) copy (issue 45: 2,048 brokers on one machine); the
machine's limits are checked first (testsize_limits.py), and a fork that fails ends the start with one line.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import socket
import sys
import time
from pathlib import Path

from .attributes import Attributes
from .bootstrap import BootstrapConfig, BootstrapError, load_config
from .bootstrap_toml import bootstrap_toml
from .broker import BrokerOptions, Module, instance_topology, run_broker
from .curve_cert import CurveCertError, CurveCertificate, generate_certificate, load_zcert, render_zcert
from .errors import InputError
from .modules import default_modules, import_for_sharing
from .payloads import ResourceReport
from .resources import local_resources
from .tempdir import make_rundir
from .testsize_fork import Fork, choose_fork
from .testsize_limits import LimitError, prepare_limits

EXIT_GRACE = 10.0
POLL_INTERVAL = 0.01  # reaping without a wakeup fd (not the main thread)
WAKEUP_TIMEOUT = 1.0  # a bound on one sleep, whatever the signals say
HEARTBEATS_PER_SECOND_BUDGET = 256
"""How many brokers' worth of 1 s heartbeats a test instance pays by default. Every broker here shares this machine:
each beat wakes a broker and its zmq I/O thread, about 0.5-1 ms of CPU per broker per second measured at 256-512
brokers on the 2-core machine, so 2,048 brokers beating each second kept both cores busy while idle, and every
second of a long start-up made it longer. Past this many brokers the default interval grows with the size."""
MAX_TEST_HEARTBEAT = 5.0  # flux-core's tbon.torpid_min: how often its idle children tell their parent they live


def heartbeat_default(size: int, attrs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """-Sheartbeat.interval for a test instance of `size` brokers, unless the user chose heartbeats: 1 s (the
    broker's default) up to HEARTBEATS_PER_SECOND_BUDGET brokers, then size/budget seconds, at most 5 s. A
    follower that dies is still seen at once by its children (their connection closes) and by its parent at the
    parent's next beat; silence is still given heartbeat.timeout (30 s)."""
    if size <= HEARTBEATS_PER_SECOND_BUDGET or any(name.startswith("heartbeat.") for name, _ in attrs):
        return []
    return [("heartbeat.interval", f"{min(size / HEARTBEATS_PER_SECOND_BUDGET, MAX_TEST_HEARTBEAT):g}")]


def loopback_address(index: int) -> str:
    """127.0.0.1, 127.0.0.2, ... (wrapping into the next octets beyond 254 brokers)."""
    n = index + 1
    return f"127.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


def free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def write_test_config(rundir: Path, size: int, hostnames: list[str]) -> Path:
    """A real [bootstrap] config + curve certificate for a local test instance; returns the config dir."""
    confdir = rundir / "conf"
    confdir.mkdir(parents=True, exist_ok=True)
    hosts = []
    for rank, host in enumerate(hostnames):
        uri = f"tcp://{loopback_address(rank)}:{free_port(loopback_address(rank))}"
        hosts.append({"host": host, "bind": uri, "connect": uri})
    curve_cert = None
    if size > 1:
        cert_path = rundir / "curve.cert"
        cert_path.write_text(render_zcert(generate_certificate(hostnames[0], hostnames[0])))
        cert_path.chmod(0o600)
        curve_cert = str(cert_path)
    (confdir / "bootstrap.toml").write_text(bootstrap_toml(hosts, curve_cert))
    return confdir


def default_hostnames(size: int) -> list[str]:
    short = socket.gethostname().split(".", 1)[0] or "localhost"
    return [f"{short}-{i}" for i in range(size)]


def _prepare_sharing() -> Fork:
    """What makes many brokers share the parent's pages, at a cost one broker alone would only pay: libc's fork
    (ctypes loaded) and the parent's free heap taken (about 1 MB it keeps), so `flux start --test-size=1` skips it."""
    from .testsize_heap import settle_heap  # ctypes: loaded only when there are brokers to share with

    fork, why = choose_fork()
    if why:  # the plain path: every broker pays for CPython's after-fork work (testsize_fork.py)
        print(f"flux-start: forking brokers with os.fork: {why}", file=sys.stderr)
    settle_heap()  # the brokers' first allocations in pages of their own, not in the shared heap's holes
    return fork


def _fork_broker(
    fork: Fork,
    config: BootstrapConfig,
    cert: CurveCertificate | None,
    rank: int,
    hostname: str,
    attrs: list[tuple[str, str]],
    rundir: str,
    command: list[str],
    verbose: bool,
    modules: list[Module],
    resources: ResourceReport,
) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = fork()
    if pid:
        return pid
    code = 1
    try:
        if rank > 0:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes through the lead
        options = BrokerOptions(
            config=config,
            attrs=Attributes([*attrs, ("rundir", os.path.join(rundir, str(rank)))]),
            hostname=hostname,
            command=command if rank == 0 else [],
            verbose=verbose,
            handle_sigint=rank == 0,
            cert=cert,
            modules=modules,
            resources=resources,
        )
        code = run_broker(options)
    except BaseException as exc:  # never return into the parent's code in a child
        print(f"flux-broker[{rank}]: {exc!r}", file=sys.stderr)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _shared_state(config: BootstrapConfig, attrs: list[tuple[str, str]]) -> ResourceReport:
    """What every broker would otherwise compute for itself, made once before forking so that the brokers share
    it: the config's host views, the tree, this machine's resources (all the same for every broker here)."""
    config.prepare()
    with contextlib.suppress(InputError):  # a bad tbon setting: each broker says so itself
        instance_topology(config, Attributes(attrs))
    return local_resources(0, "")


def run_test_instance(
    size: int,
    command: list[str],
    attrs: list[tuple[str, str]] | None = None,
    hostnames: list[str] | None = None,
    verbose: bool = False,
) -> int:
    """Start `size` brokers, wait for rank 0 (which runs `command`), reap the rest; return rank 0's exit code."""
    if size < 1:
        print("flux-start: --test-size must be >= 1", file=sys.stderr)
        return 1
    hostnames = hostnames or default_hostnames(size)
    if len(hostnames) != size:
        print(f"flux-start: --test-hosts names {len(hostnames)} hosts but --test-size is {size}", file=sys.stderr)
        return 1
    try:
        prepare_limits(size)
    except LimitError as exc:
        print(f"flux-start: --test-size={size} {exc}", file=sys.stderr)
        return 1
    rundir = Path(make_rundir())
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    pids: dict[int, int] = {}
    try:
        try:
            config = load_config(write_test_config(rundir, size, hostnames))
            cert = load_zcert(config.curve_cert) if config.curve_cert else None
        except (BootstrapError, CurveCertError) as exc:
            print(f"flux-start: {exc}", file=sys.stderr)
            return 1
        modules = default_modules()  # imported here once, not after the fork in every broker (~70 ms each)
        if size > 1:
            import_for_sharing()  # what brokers load on first use, shared by them all
        resources = _shared_state(config, attrs or [])
        attrs = [*heartbeat_default(size, attrs or []), *(attrs or [])]
        fork = _prepare_sharing() if size > 1 else os.fork
        rundir_text = str(rundir)  # a child joins strings, not pathlib's objects (their pages would be its to copy)
        gc.freeze()  # the collector leaves the imported objects alone: their pages stay shared with the children
        for rank in range(size):
            try:
                pid = _fork_broker(
                    fork,
                    config,
                    cert,
                    rank,
                    hostnames[rank],
                    attrs or [],
                    rundir_text,
                    command,
                    verbose,
                    modules,
                    resources,
                )
            except OSError as exc:  # EAGAIN/ENOMEM: the brokers started so far are killed below
                print(f"flux-start: cannot start broker rank {rank} of {size}: fork: {exc.strerror}", file=sys.stderr)
                return 1
            pids[pid] = rank
        return _wait_instance(pids, received)
    finally:
        gc.unfreeze()  # this process is no broker: only the children needed its objects left alone
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        for signum, handler in old.items():
            signal.signal(signum, handler)
        import shutil  # here, not at the top: its compressors would be in every broker forked (issue 45)

        shutil.rmtree(rundir, ignore_errors=True)


class _Wakeups:
    """Sleeping until a broker exits or a signal comes (SIGCHLD and the others, through the wakeup fd) rather than in
    10 ms polls: each poll's waitpid scans every broker, 2,048 of them 100 times a second while they start (about
    2% of the machine). Installed after the last fork, so no broker inherits the handler; where signals cannot be
    waited for (not the main thread), the 10 ms polls it is."""

    def __init__(self) -> None:
        self._read = self._write = -1
        self._old_fd = -1
        self._old_chld: signal._HANDLER = None

    def __enter__(self) -> _Wakeups:
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        try:
            self._old_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except ValueError:  # not the main thread: no wakeup fd, polls
            os.close(read)
            os.close(write)
            return self
        self._read, self._write = read, write
        self._old_chld = signal.signal(signal.SIGCHLD, _on_child_exit)
        return self

    def wait(self, timeout: float) -> None:
        if self._read < 0:
            time.sleep(POLL_INTERVAL)
            return
        select.select([self._read], [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            os.read(self._read, 4096)

    def __exit__(self, *_exc: object) -> None:
        if self._read < 0:
            return
        signal.signal(signal.SIGCHLD, self._old_chld)
        signal.set_wakeup_fd(self._old_fd)
        os.close(self._read)
        os.close(self._write)


def _on_child_exit(_signum: int, _frame: object) -> None:
    """Nothing: SIGCHLD's delivery writes the wakeup fd, which is all the waiting needs."""


def _wait_instance(pids: dict[int, int], received: list[int]) -> int:
    """Reap brokers; a follower failing early or a signal to us shuts the instance down via rank 0."""
    with _Wakeups() as wakeups:
        return _reap(pids, received, wakeups)


def _reap(pids: dict[int, int], received: list[int], wakeups: _Wakeups) -> int:
    lead = next(pid for pid, rank in pids.items() if rank == 0)
    lead_code: int | None = None
    failure: int | None = None
    deadline: float | None = None
    while pids:
        if received:
            received.clear()
            if lead in pids:
                os.kill(lead, signal.SIGTERM)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            if deadline is not None and time.monotonic() > deadline:
                for left in list(pids):
                    print(f"flux-start: rank {pids[left]} did not exit; killing it", file=sys.stderr)
                    os.kill(left, signal.SIGKILL)
                deadline = None
            wakeups.wait(
                WAKEUP_TIMEOUT if deadline is None else max(0.0, min(WAKEUP_TIMEOUT, deadline - time.monotonic()))
            )
            continue
        rank = pids.pop(pid, None)
        if rank is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        code = 128 - code if code < 0 else code
        if rank == 0:
            lead_code = code
            deadline = time.monotonic() + EXIT_GRACE
        elif code != 0 and lead_code is None and failure is None:
            failure = code
            print(f"flux-start: rank {rank} exited with status {code}; shutting the instance down", file=sys.stderr)
            if lead in pids:
                os.kill(lead, signal.SIGTERM)
    if lead_code is None:
        return failure or 1
    return failure if lead_code == 0 and failure else lead_code
