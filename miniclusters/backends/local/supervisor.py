"""A local pod's first process: the kubelet's part for one pod (run the container, restart it when it fails).

It names the host (in the pod's own UTS namespace), runs the rendered entrypoint and, when the entrypoint fails,
applies the Job's restart semantics as Kubernetes would for this pod: with `restartPolicy` OnFailure (the
default) or Never, a failed follower is restarted (OnFailure: the kubelet restarts the container; Never: the Job
controller recreates the index; here both restart the pod in place and count it) after an exponential back-off,
as long as the Job's failures stay within `backoffLimit` (one count shared by every pod of the cluster). Before
each restart everything the dead container left in the pod is killed (its cgroup and its session), so the old
broker's tasks never outlive it. The new broker has the same index, hostname and address, so it rejoins the
lead as the same rank.

Because this process lives inside the pod, restarts happen whether or not any `minicluster` command is running
(`up --detach` returns and the pods keep supervising themselves), as a node's kubelet does.

The lead (index 0) of a cluster that runs a command is not restarted: its exit code is the cluster's result
(`up` exits with it); an interactive cluster's lead is (see restart.policy_for). A pod that exits 0 has
completed (with `flux.completeWorkers` every follower exit counts as completion).

Standard library only, run by path (`python -I -S supervisor.py`): a pod must not pay for importing pydantic.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

RESTART_ENV = "MINICLUSTERS_LOCAL_RESTART"
STATE_FILE = "restarts.json"
CRASH_LOOP = "CrashLoopBackOff"
BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"


@dataclass(frozen=True)
class RestartPolicy:
    """What this pod does when its container fails (derived from the spec by the backend)."""

    restart: bool
    """False for the lead and for restartPolicy values that never restart."""
    backoff_limit: int
    failures_file: str
    """The cluster's failure count, shared by every pod (flock'd)."""
    state_file: str
    """This pod's restarts, last exit code and waiting reason, read by `minicluster status`."""
    cgroup_procs: str | None = None
    delay: float = 1.0
    """First back-off in seconds (the kubelet uses 10 s); doubled per restart of this pod."""
    max_delay: float = 60.0
    permanent: tuple[int, ...] = ()
    """Exit codes no restart can change (the broker refused its input, broker/refused.py): the pod fails."""

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, text: str) -> RestartPolicy:
        data = json.loads(text)
        data["permanent"] = tuple(data.get("permanent", ()))
        return cls(**data)


def backoff_delay(restarts: int, delay: float, max_delay: float) -> float:
    """The wait before restart number `restarts + 1`: delay, 2*delay, 4*delay, ... at most max_delay."""
    return float(min(max_delay, delay * (2 ** min(restarts, 32))))


def claim_failure(path: Path, backoff_limit: int) -> tuple[bool, int]:
    """Count one failure of the Job; (may restart, failures so far). Retries end once backoffLimit is reached."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        handle.seek(0)
        text = handle.read().strip()
        failures = int(text) if text.isdigit() else 0
        if failures >= backoff_limit:
            return False, failures
        failures += 1
        handle.seek(0)
        handle.truncate()
        handle.write(str(failures))
        handle.flush()
        return True, failures


def replace_text(path: Path, text: str) -> None:
    """Write a file whole (beside it, then rename). This process runs with the standard library only (see the
    module doc), so it keeps this one copy of common/atomic.py's write_text."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    temporary.replace(path)


def write_state(path: Path, **state: object) -> None:
    replace_text(path, json.dumps(state))


def read_state(path: Path) -> dict[str, object]:  # open: the supervisor's state file as JSON
    """The pod's restart record ({} before the first failure)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# ---------------------------------------------------------------------------------------- the pod's processes
def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def pod_processes(session: int, cgroup_procs: str | None) -> set[int]:
    """Everything of the pod except this supervisor: its cgroup and its session (tasks run in their own process
    groups but stay in the pod's session). Not the pod's environment tag: tasks carry their submitter's
    environment, so another pod's tasks may carry this pod's tag."""
    found: set[int] = set()
    if cgroup_procs:
        with contextlib.suppress(OSError, ValueError):
            found.update(int(line) for line in Path(cgroup_procs).read_text().split())
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None and fields[0] not in ("Z", "X") and int(fields[3]) == session:
            found.add(int(entry.name))
    found.discard(os.getpid())
    return {pid for pid in found if (fields := _stat_fields(pid)) is not None and fields[0] not in ("Z", "X")}


def kill_pod_processes(session: int, cgroup_procs: str | None, grace: float = 2.0) -> int:
    """SIGTERM what the dead container left in the pod, then SIGKILL what is still there; how many were found."""
    first = pod_processes(session, cgroup_procs)
    for pid in first:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and pod_processes(session, cgroup_procs):
        time.sleep(0.05)
    for _ in range(100):
        left = pod_processes(session, cgroup_procs)
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    _reap()
    return len(first)


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


# ---------------------------------------------------------------------------------------- main loop
class Supervisor:
    def __init__(self, entrypoint: str, exit_file: Path, policy: RestartPolicy | None) -> None:
        self.entrypoint = entrypoint
        self.exit_file = exit_file
        self.policy = policy
        self.stopping = False
        self.child: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def _on_signal(self, signum: int, _frame: object) -> None:
        """`down` (or a scale-down) stops the pod: never restart after that, pass the signal on."""
        self.stopping = True
        if self.child is not None and self.child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.child.send_signal(signum)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGHUP, self._on_signal)
        while True:
            self.child = subprocess.Popen(["bash", self.entrypoint])
            rc = self.child.wait()
            if rc < 0:
                rc = 128 - rc  # as a shell reports a death by signal
            if rc == 0 or self.stopping or self.policy is None or not self.policy.restart:
                return self._finish(rc, None)
            policy = self.policy
            if rc in policy.permanent:
                print(
                    f"[supervisor] container exited {rc}: it refused its input for good; not restarting",
                    file=sys.stderr,
                    flush=True,
                )
                return self._finish(rc, None)
            killed = kill_pod_processes(os.getsid(0), policy.cgroup_procs)
            allowed, failures = claim_failure(Path(policy.failures_file), policy.backoff_limit)
            if not allowed:
                print(
                    f"[supervisor] container exited {rc}; the Job's backoffLimit ({policy.backoff_limit}) is "
                    "reached: not restarting",
                    file=sys.stderr,
                    flush=True,
                )
                return self._finish(rc, BACKOFF_LIMIT_EXCEEDED)
            wait = backoff_delay(self.restarts, policy.delay, policy.max_delay)
            print(
                f"[supervisor] container exited {rc}; killed {killed} leftover process(es); restart "
                f"{self.restarts + 1} in {wait:.1f}s (Job failures {failures}/{policy.backoff_limit})",
                file=sys.stderr,
                flush=True,
            )
            self._record(rc, CRASH_LOOP)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and not self.stopping:
                time.sleep(0.05)
            if self.stopping:
                return self._finish(rc, None)
            self.restarts += 1
            self._record(rc, None)

    def _record(self, rc: int, waiting: str | None) -> None:
        if self.policy is not None:
            write_state(
                Path(self.policy.state_file),
                restarts=self.restarts,
                last_exit_code=rc,
                last_finished_at=time.time(),
                waiting=waiting,
            )

    def _finish(self, rc: int, reason: str | None) -> int:
        if reason is not None:
            self._record(rc, reason)
        replace_text(self.exit_file, f"{rc}\n")
        return rc


def main() -> int:
    hostname = os.environ.pop("MINICLUSTERS_LOCAL_SET_HOSTNAME", "")
    if hostname:
        try:
            socket.sethostname(hostname)
        except OSError as exc:
            print(f"cannot set hostname {hostname!r}: {exc}", file=sys.stderr)
            return 111
    policy_text = os.environ.pop(RESTART_ENV, "")
    policy = RestartPolicy.from_env(policy_text) if policy_text else None
    entrypoint = os.environ["MINICLUSTERS_LOCAL_ENTRYPOINT"]
    exit_file = Path(os.environ["MINICLUSTERS_LOCAL_EXIT"])
    return Supervisor(entrypoint, exit_file, policy).run()


if __name__ == "__main__":
    sys.exit(main())
