"""Bootstrap benchmark for the built-in broker: wall time to online / end to end, and follower RSS.

Run: .venv/bin/python bench/bench_bootstrap.py [--repeat 3] [--sizes 1,4,16,64]
Prints figures; it is not a test (no thresholds are asserted).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker.testing import FLUX, render_instance, wait_for


def one_run(size: int, workdir: Path) -> tuple[float, float]:
    """(seconds from `flux start` to the initial program starting, seconds end to end)."""
    marker = workdir / f"online-{size}-{time.monotonic_ns()}"
    start_ns = time.time_ns()
    started = time.monotonic()
    done = subprocess.run([FLUX, "start", f"--test-size={size}", "touch", str(marker)], capture_output=True, text=True)
    total = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"flux start --test-size={size} failed ({done.returncode}): {done.stderr}")
    online = (marker.stat().st_mtime_ns - start_ns) / 1e9
    return online, total


def vmrss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def children_of(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                kids.append(int(entry.name))
    return kids


def forked_follower_rss(size: int, workdir: Path) -> list[int]:
    """VmRSS (kB) of each follower of a running `flux start --test-size=size` instance."""
    marker = workdir / f"rss-{size}"
    proc = subprocess.Popen(
        [FLUX, "start", f"--test-size={size}", "sh", "-c", f"touch {marker}; sleep 60"], start_new_session=True
    )
    try:
        wait_for(marker.exists, 60)
        time.sleep(0.5)
        brokers = children_of(proc.pid)
        followers = [pid for pid in brokers if not children_of(pid)]  # rank 0 is the one running `sh`
        return [vmrss_kb(pid) for pid in followers]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def standalone_follower_rss(workdir: Path) -> int:
    """VmRSS (kB) of a follower started as its own `flux broker` process (one per pod)."""
    (workdir / "standalone").mkdir()
    inst = render_instance(workdir / "standalone", 2)
    try:
        inst.start(0)
        follower = inst.start(1)
        with inst.handle(0) as h:
            wait_for(lambda: h.rpc("overlay.status")["ranks"][1]["state"] == "up", 30)
        time.sleep(0.3)
        return vmrss_kb(follower.pid)
    finally:
        inst.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1,4,16,64")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"machine: {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    print(f"{'N':>4} {'online median':>14} {'online min':>11} {'end-to-end median':>18} {'end-to-end max':>15}")
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as tmp:
        workdir = Path(tmp)
        for size in sizes:
            runs = [one_run(size, workdir) for _ in range(args.repeat)]
            online = [r[0] for r in runs]
            total = [r[1] for r in runs]
            print(
                f"{size:>4} {statistics.median(online):>13.2f}s {min(online):>10.2f}s "
                f"{statistics.median(total):>17.2f}s {max(total):>14.2f}s",
                flush=True,
            )
        print()
        for size in (4, 16):
            rss = forked_follower_rss(size, workdir)
            print(
                f"follower VmRSS, test-size={size} (forked): mean {statistics.mean(rss) / 1024:.1f} MB, "
                f"max {max(rss) / 1024:.1f} MB over {len(rss)} followers"
            )
        print(f"follower VmRSS, standalone `flux broker` process: {standalone_follower_rss(workdir) / 1024:.1f} MB")


if __name__ == "__main__":
    main()
