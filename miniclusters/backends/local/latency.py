"""Added network latency between local pods (`minicluster up --latency 500us`): netem, else an NFQUEUE delay line.

netem on each pod's eth0 is the standard tool. Kernels built without sch_netem (no modules, as on small VMs) still
carry netfilter's user-space queue, so the fallback sends every packet leaving eth0 through NFQUEUE to
`mc-delayline` (delayline.c) running inside the pod's namespace, which holds it for the delay and accepts it: the
same constant per-direction delay, RTT = 2 x delay. Which method is used is recorded and shown by `status`.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

from elasticity.pmpi.build import PmpiBuildError, compile_with_mpicc
from miniclusters.backends.local.programs import cache_root
from miniclusters.errors import MiniclustersError

DELAY_LINE_SOURCE = Path(__file__).with_name("delayline.c")
DELAY_LINE_NAME = "mc-delayline"
DELAY_LINE_FLAGS = ("-O2", "-Wall", "-Wextra", "-Werror")
DELAY_LINE_LIBS = ("-lnetfilter_queue", "-lnfnetlink")
QUEUE_HEADER = Path("/usr/include/libnetfilter_queue/libnetfilter_queue.h")
QUEUE_NUMBER = 0
DURATION = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s)$")
UNIT_MICROSECONDS = {"us": 1.0, "ms": 1e3, "s": 1e6}
READY_TIMEOUT = 10.0
MAX_DELAY_US = 10_000_000  # delayline.c refuses more


class LatencyError(MiniclustersError, RuntimeError):
    """Latency could not be added to a pod; the message names the step and carries its stderr."""


def microseconds(delay: str) -> float:
    """'2ms' -> 2000.0, '500us' -> 500.0, '0.1s' -> 100000.0; ValueError says what is wrong (without the value)."""
    match = DURATION.match(delay)
    if match is None:
        raise ValueError("expected a duration like 2ms, 500us or 0.1s")
    value = float(match.group(1)) * UNIT_MICROSECONDS[match.group(2)]
    if not 0 < value <= MAX_DELAY_US:
        raise ValueError("expected a delay above 0 and at most 10s")
    return value


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), capture_output=True, text=True, timeout=30)


# ------------------------------------------------------------------------------------------ probing
def netem_available() -> tuple[bool, str]:
    """Whether the netem qdisc can be attached here, tried on the loopback link of a throw-away namespace."""
    if shutil.which("tc") is None:
        return False, "the `tc` command is not installed (package iproute2)"
    probe = f"mc-netem-probe-{os.getpid()}"
    try:
        if (made := _run("ip", "netns", "add", probe)).returncode != 0:
            return False, f"`ip netns add` failed: {made.stderr.strip()}"
        result = _run("tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")
    finally:
        _run("ip", "netns", "del", probe)
    if result.returncode != 0:
        return False, f"`tc qdisc add ... netem` failed: {result.stderr.strip() or result.returncode}"
    return True, ""


def delay_line_available() -> tuple[bool, str]:
    """Whether the NFQUEUE fallback can run: iptables' NFQUEUE target accepted in a throw-away namespace, and the
    delay line built (or buildable) with a C compiler and libnetfilter_queue."""
    if shutil.which("iptables") is None:
        return False, "the `iptables` command is not installed (package iptables)"
    if not Path("/proc/net/netfilter/nfnetlink_queue").exists():
        return False, "this kernel has no nfnetlink_queue (CONFIG_NETFILTER_NETLINK_QUEUE)"
    probe = f"mc-nfq-probe-{os.getpid()}"
    try:
        if (made := _run("ip", "netns", "add", probe)).returncode != 0:
            return False, f"`ip netns add` failed: {made.stderr.strip()}"
        rule = _run("ip", "netns", "exec", probe, "iptables", *_queue_rule("-A", "lo"))
    finally:
        _run("ip", "netns", "del", probe)
    if rule.returncode != 0:
        return False, f"iptables' NFQUEUE target was refused: {rule.stderr.strip() or rule.returncode}"
    try:
        build_delay_line()
    except LatencyError as exc:
        return False, str(exc)
    return True, ""


def choose_method() -> tuple[str | None, str]:
    """("netem", "") or ("nfqueue", why netem is out) or (None, why neither can run)."""
    netem_ok, netem_why = netem_available()
    if netem_ok:
        return "netem", ""
    queue_ok, queue_why = delay_line_available()
    if queue_ok:
        return "nfqueue", netem_why
    return None, f"netem: {netem_why}; NFQUEUE delay line: {queue_why}"


# ------------------------------------------------------------------------------------------ applying
def build_delay_line() -> Path:
    """Compile delayline.c once into the cache (rebuilt when the source or compiler changes)."""
    if shutil.which("cc") is None:
        raise LatencyError("building mc-delayline needs a C compiler (apt-get install gcc, or `make setup`)")
    if not QUEUE_HEADER.is_file():
        raise LatencyError(
            "building mc-delayline needs libnetfilter_queue (apt-get install libnetfilter-queue-dev, or `make setup`)"
        )
    try:
        return compile_with_mpicc(
            DELAY_LINE_SOURCE, DELAY_LINE_NAME, DELAY_LINE_FLAGS, DELAY_LINE_LIBS, cache_root() / "delayline", "cc"
        )
    except PmpiBuildError as exc:
        raise LatencyError(f"building mc-delayline: {exc}") from None


def _queue_rule(action: str, device: str) -> tuple[str, ...]:
    """`-w`: iptables-legacy's lock is one file for every namespace; podman and other pods' rules may hold it."""
    return (
        "-w", "10", "-t", "mangle", action, "POSTROUTING", "-o", device,
        "-j", "NFQUEUE", "--queue-num", str(QUEUE_NUMBER), "--queue-bypass",
    )  # fmt: skip


def add_latency(namespace: str, delay: str, method: str, log_file: Path) -> None:
    """Delay every packet leaving the pod's eth0 by `delay`, so each packet between pods pays it once per direction."""
    if method == "netem":
        result = _run("tc", "-n", namespace, "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", delay)
        if result.returncode != 0:
            raise LatencyError(f"adding {delay} latency to {namespace}/eth0 (netem): {result.stderr.strip()}")
        return
    if method != "nfqueue":
        raise LatencyError(f"unknown latency method {method!r} (expected netem or nfqueue)")
    _start_delay_line(namespace, microseconds(delay), build_delay_line(), log_file)
    rule = _run("ip", "netns", "exec", namespace, "iptables", *_queue_rule("-A", "eth0"))
    if rule.returncode != 0:
        stop_delay_lines(namespace)
        raise LatencyError(f"adding the NFQUEUE rule in {namespace}: {rule.stderr.strip()}")


def _start_delay_line(namespace: str, delay_us: float, binary: Path, log_file: Path) -> None:
    """Start the delay line detached (it outlives `up --detach`) and wait until it holds the queue."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as log:
        child = subprocess.Popen(
            ["ip", "netns", "exec", namespace, str(binary), str(QUEUE_NUMBER), f"{delay_us:g}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], READY_TIMEOUT)
    line = child.stdout.readline().decode(errors="replace").strip() if ready else ""
    child.stdout.close()
    if line != "ready":
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        child.wait(5)
        tail = log_file.read_text(errors="replace").strip().splitlines()[-3:]
        raise LatencyError(f"mc-delayline in {namespace} did not start: {' / '.join(tail) or 'no output'}")


def delay_line_pids(namespace: str) -> list[int]:
    """The delay lines running in `namespace` (by executable name, so nothing else in it is touched)."""
    listed = _run("ip", "netns", "pids", namespace)
    pids = []
    for word in listed.stdout.split():
        with contextlib.suppress(OSError, ValueError):
            if Path(os.readlink(f"/proc/{int(word)}/exe")).name == DELAY_LINE_NAME:
                pids.append(int(word))
    return pids


def stop_delay_lines(namespace: str, grace: float = 2.0) -> None:
    """SIGTERM (the delay line releases what it holds), then SIGKILL after `grace` seconds."""
    pids = delay_line_pids(namespace)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if Path(f"/proc/{pid}").exists() and not _zombie(pid)]
        time.sleep(0.02)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
