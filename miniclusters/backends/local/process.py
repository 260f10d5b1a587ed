"""Starting, watching and stopping a local pod's processes.

A pod is a small supervisor process (supervisor.py) in its own session (so Ctrl-C in the user's terminal never
reaches it) that runs the rendered entrypoint, restarts it as the Job's restart policy says, and writes its exit
code to a file: the "container status" a later `minicluster status` reads from any shell. As root the supervisor
first joins the pod's cgroup, then enters the pod's network namespace (`ip netns exec`, which also bind-mounts
the pod's /etc/hosts) and a UTS namespace carrying the pod's hostname, so everything it starts, the broker and
every job process, is inside the pod. Every pod process carries an environment tag, so stragglers that left the
session (jobs in their own process groups) are still found and stopped.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from miniclusters.backends import exec_session
from miniclusters.backends.local.cgroupfs import host_mounts, remount_script
from miniclusters.backends.local.supervisor import RESTART_ENV

TAG_VARIABLE = "MINICLUSTERS_LOCAL_POD"
EXIT_FILE = "exitcode"
LOG_FILE = "log"

# Runs as the pod's first process: names the host, runs the entrypoint, restarts it per the Job's restart
# semantics, records its exit code (standard library only, run by path so a pod never imports this package).
SUPERVISOR = Path(__file__).with_name("supervisor.py")

# Joins a cgroup before exec'ing the rest of argv (so nothing runs outside it, not even for an instant).
JOIN_CGROUP = 'echo $$ > "$0" && exec "$@"'


@dataclass(frozen=True)
class Launch:
    """Everything needed to start one pod."""

    tag: str
    pod_dir: Path
    entrypoint: Path
    environment: dict[str, str]
    cwd: str
    netns: str | None = None
    hostname: str | None = None
    """Set in a fresh UTS namespace (netns mode); None leaves the machine's hostname (process mode)."""
    cgroup_procs: Path | None = None
    cpuset_procs: Path | None = None
    """The pod's cpuset (exclusive CPUs), joined like its CPU cgroup; the same file on cgroup v2."""
    nice: int | None = None
    restart: str | None = None
    """The supervisor's RestartPolicy (JSON); None never restarts."""


def tag_for(cluster_dir: Path, index: int) -> str:
    return f"{cluster_dir}#{index}"


def pod_argv(launch: Launch) -> list[str]:
    """The command line that becomes the pod: [join cgroup] [enter netns + new UTS ns] [nice] supervisor."""
    argv: list[str] = [sys.executable, "-I", "-S", str(SUPERVISOR)]
    if launch.nice is not None:
        argv = ["nice", "-n", str(launch.nice), *argv]
    if launch.netns:
        script = remount_script(host_mounts())
        if script is not None:  # `ip netns exec` hid /sys/fs/cgroup: the pod gets its cgroups back, as a container
            argv = ["sh", "-c", script, "remount-cgroups", *argv]
        argv = ["ip", "netns", "exec", launch.netns, "unshare", "--uts", *argv]
    if launch.cgroup_procs is not None:
        argv = ["sh", "-c", JOIN_CGROUP, str(launch.cgroup_procs), *argv]
    if launch.cpuset_procs is not None and launch.cpuset_procs != launch.cgroup_procs:
        argv = ["sh", "-c", JOIN_CGROUP, str(launch.cpuset_procs), *argv]
    return argv


def start(launch: Launch) -> subprocess.Popen[bytes]:
    """Start the pod; its output goes to the pod's log file, its exit code to the pod's exit file."""
    launch.pod_dir.mkdir(parents=True, exist_ok=True)
    (launch.pod_dir / "tmp").mkdir(exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        (launch.pod_dir / EXIT_FILE).unlink()
    env = dict(launch.environment)
    env[TAG_VARIABLE] = launch.tag
    env["MINICLUSTERS_LOCAL_ENTRYPOINT"] = str(launch.entrypoint)
    env["MINICLUSTERS_LOCAL_EXIT"] = str(launch.pod_dir / EXIT_FILE)
    if launch.hostname and launch.netns:
        env["MINICLUSTERS_LOCAL_SET_HOSTNAME"] = launch.hostname
    if launch.restart:
        env[RESTART_ENV] = launch.restart
    with open(launch.pod_dir / LOG_FILE, "ab") as log:
        return subprocess.Popen(
            pod_argv(launch),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=launch.cwd,
            start_new_session=True,
        )


# ---------------------------------------------------------------------------------------- watching
def start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks); None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[19])


def _state(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[0]


def alive(pid: int | None, ticks: int | None) -> bool:
    """The recorded process still runs (not a zombie, and not another process that got the same pid)."""
    if pid is None:
        return False
    state = _state(pid)
    if state is None:
        return False
    if state in ("Z", "X"):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reap it if it is our child
        return False
    return ticks is None or start_ticks(pid) == ticks


def exit_code(pod_dir: Path) -> int | None:
    try:
        return int((pod_dir / EXIT_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def tagged(tag: str, prefix: bool = False, variable: str = TAG_VARIABLE) -> list[int]:
    """Pids whose environment carries the pod tag (or, with prefix, any tag of the cluster; or another mark)."""
    needle = f"{variable}={tag}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        for item in environ.split(b"\0"):
            if item == needle or (prefix and item.startswith(needle)):
                found.append(int(entry.name))
                break
    return [pid for pid in found if pid != os.getpid()]


def _signal_all(pids: Sequence[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def stop(pid: int | None, ticks: int | None, tag: str, grace: float = 3.0, prefix: bool = False) -> None:
    """SIGTERM the pod's session (brokers leave their parent cleanly), then SIGKILL whatever is left."""
    if pid is not None and alive(pid, ticks):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    _signal_all(tagged(tag, prefix), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not tagged(tag, prefix) and not alive(pid, ticks):
            break
        time.sleep(0.05)
    for _ in range(50):
        left = tagged(tag, prefix)
        if pid is not None and alive(pid, ticks):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        if not left and not alive(pid, ticks):
            return
        _signal_all(left, signal.SIGKILL)
        time.sleep(0.05)


def renice(tag: str, nice: int) -> list[str]:
    """Set every pod process to `nice`; returns the errors (lowering nice needs privilege)."""
    errors = []
    for pid in tagged(tag):
        try:
            os.setpriority(os.PRIO_PROCESS, pid, nice)
        except ProcessLookupError:
            continue
        except PermissionError as exc:
            errors.append(f"pid {pid}: {exc.strerror}")
    return errors


def current_nice(pid: int | None) -> int | None:
    if pid is None:
        return None
    try:
        return os.getpriority(os.PRIO_PROCESS, pid)
    except OSError:
        return None


def run_in_pod(
    argv: list[str],
    environment: dict[str, str],
    cwd: str,
    pid: int | None,
    netns: bool,
    cgroup_procs: Path | None,
    timeout: float,
    cpuset_procs: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command inside a running pod: its namespaces (entered through the pod's first process), its cgroup
    and, for a pinned pod, its cpuset (so what it starts runs on the pod's cores only)."""
    command = list(argv)
    if netns and pid is not None:
        # nsenter resets the working directory to / when it enters the mount namespace: keep the pod's
        command = ["nsenter", "-t", str(pid), "-m", "-u", "-n", f"--wd={cwd}", "--", *command]
    if cgroup_procs is not None and cgroup_procs.exists():
        command = ["sh", "-c", JOIN_CGROUP, str(cgroup_procs), *command]
    if cpuset_procs is not None and cpuset_procs != cgroup_procs and cpuset_procs.exists():
        command = ["sh", "-c", JOIN_CGROUP, str(cpuset_procs), *command]
    return run_bounded(command, environment, cwd, timeout)


def run_bounded(
    command: list[str], environment: dict[str, str], cwd: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run to completion in a session of its own, its processes marked (exec_session.py). Past `timeout`, or when
    the caller is interrupted (Ctrl-C, or SIGTERM/SIGHUP the CLI turns into one), the command and everything it
    started, even what left its session, are ended before TimeoutExpired (or the interrupt) goes on. subprocess.run
    kills only the first process: the rest went on running in the pod after the command had been given up on."""
    token = exec_session.new_token()
    proc = subprocess.Popen(
        command,
        env={**environment, exec_session.EXEC_VARIABLE: token},
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _end_exec(proc, token)
        raise subprocess.TimeoutExpired(command, timeout) from None
    except BaseException:
        _end_exec(proc, token)
        raise
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _end_exec(proc: subprocess.Popen[str], token: str, grace: float = exec_session.END_GRACE) -> None:
    """SIGHUP and SIGTERM to the exec's session and to every process carrying its mark (a lost terminal), SIGKILL
    to what is left after `grace`; then reap it. The session leader is reaped last, so its id (the group's) cannot
    be reused by another process while it is signalled."""
    marked = functools.partial(tagged, token, variable=exec_session.EXEC_VARIABLE)
    for signum in (signal.SIGHUP, signal.SIGTERM):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signum)
        _signal_all(marked(), signum)
    deadline = time.monotonic() + grace
    while marked() and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    _signal_all(marked(), signal.SIGKILL)
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:  # something unmarked kept the pipes: stop reading them
        proc.kill()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        proc.wait()
