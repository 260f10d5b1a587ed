"""`resource.cpu`: each pod's request read back from its cgroup weight, and its CPU time (fake cgroup trees)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from broker.cpu_report import cpu_report
from broker.rest.web.cluster_data import request_millicores
from elasticity.model import cpu as cpu_model

V1_SPLIT = "4:cpuacct:/mc/c/1\n3:cpu:/mc/c/1\n0::/\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_v1_request_from_shares_and_usage_from_the_separate_cpuacct_hierarchy(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    _write(tmp_path / "cpu" / "mc" / "c" / "1" / "cpu.shares", f"{cpu_model.milli_to_shares(750)}\n")
    _write(tmp_path / "cpuacct" / "mc" / "c" / "1" / "cpuacct.usage", "2500000000\n")
    report = cpu_report(tmp_path, V1_SPLIT)
    assert report["knob"] == "cpu.shares" and request_millicores(report) == 750
    assert report["usage_usec"] == 2_500_000 and report["usage_from"] == "cpuacct.usage"
    assert report["cgroup"].endswith("cpu/mc/c/1")


def test_v2_request_from_weight_through_the_kubelet_mapping_and_the_pod_leaf(tmp_path: Path) -> None:
    _write(tmp_path / "cgroup.controllers", "cpu memory\n")
    weight = cpu_model.milli_to_weight(2000, "nonlinear")
    _write(tmp_path / "mc" / "c" / "0" / "cpu.weight", f"{weight}\n")
    _write(tmp_path / "mc" / "c" / "0" / "cpu.stat", "usage_usec 1234567\nuser_usec 1000000\n")
    _write(tmp_path / "mc" / "c" / "0" / "pod" / "cpu.weight", "1\n")  # the pod's own processes' leaf
    report = cpu_report(tmp_path, "0::/mc/c/0/pod\n")
    assert report["knob"] == "cpu.weight" and report["weight"] == weight
    assert (
        cpu_model.milli_to_weight(request_millicores(report) or 0, "nonlinear") == weight
    )  # the pod's, not the leaf's
    assert report["usage_usec"] == 1234567 and report["cgroup"].endswith("mc/c/0")


def _cpu_usec(pid: int) -> int:
    """The process's own CPU time (utime + stime), read here independently of cpu_report."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1_000_000 // os.sysconf("SC_CLK_TCK")


def test_v1_without_cpuacct_counts_the_cgroup_s_processes(tmp_path: Path) -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.6)  # sleep: the busy child accumulates CPU time to count
        (tmp_path / "cpu").mkdir()
        _write(tmp_path / "cpu" / "pod" / "x" / "cpu.shares", "512\n")
        _write(tmp_path / "cpu" / "pod" / "x" / "cgroup.procs", f"{os.getpid() + 10**7}\n")  # gone: skipped
        _write(tmp_path / "cpu" / "pod" / "x" / "job-sim1" / "cgroup.procs", f"{busy.pid}\n")  # a child cgroup
        before_first = _cpu_usec(busy.pid)
        first = cpu_report(tmp_path, "3:cpu:/pod/x\n4:cpuacct:/\n")
        after_first = _cpu_usec(busy.pid)
        time.sleep(0.5)  # sleep: more CPU time between the two reports
        before_second = _cpu_usec(busy.pid)
        second = cpu_report(tmp_path, "3:cpu:/pod/x\n4:cpuacct:/\n")
        after_second = _cpu_usec(busy.pid)
    finally:
        busy.kill()
        busy.wait()
    assert first["usage_from"] == "processes" and request_millicores(first) == 500
    # the spinning child cgroup's process is what was counted: its own CPU time over the same interval (however
    # much of a CPU a loaded machine gave it), to the clock tick
    first_usec, second_usec = first["usage_usec"], second["usage_usec"]
    assert first_usec is not None and second_usec is not None
    counted = second_usec - first_usec
    tick = 1_000_000 // os.sysconf("SC_CLK_TCK")
    assert before_second - after_first - tick <= counted <= after_second - before_first + tick
    assert counted > 0


def test_no_cgroup_is_said_plainly(tmp_path: Path) -> None:
    assert cpu_report(tmp_path / "nothing", "")["cgroup"] == ""
