"""`minicluster simulate`: flags, JSON keys, the schedule CSV, plots and bad input."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from miniclusters.cli import main

KEYS = [
    "policy",
    "malleable",
    "jobs",
    "total_time",
    "utilization",
    "mean_wait",
    "mean_run",
    "mean_turnaround",
    "weighted_response",
    "weighted_completion",
    "expands_per_job",
    "shrinks_per_job",
    "iqr",
]


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["simulate", *args])
    return result.exit_code, result.stdout, result.stderr


def small_trace(tmp_path: Path, source: Path, jobs: int = 400) -> Path:
    lines = source.read_text().splitlines()
    header = [line for line in lines if line.startswith(";")]
    body = [line for line in lines if line.strip() and not line.startswith(";")][:jobs]
    path = tmp_path / "small.swf"
    path.write_text("\n".join(header + body) + "\n")
    return path


def test_json_rows_per_policy_and_share(tmp_path: Path, shared_trace: Callable[[str], Path]) -> None:
    trace = small_trace(tmp_path, shared_trace("sdsc"))
    code, out, err = invoke(str(trace), "--policy", "easy,min", "--malleable", "0,50,..,100", "--seeds", "2", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["policy"], r["malleable"]) for r in rows] == [
        (p, s) for s in (0.0, 50.0, 100.0) for p in ("easy", "min")
    ]
    for row in rows:
        assert list(row) == KEYS
        assert set(row["iqr"]) == set(KEYS[3:-1])
        assert 0 < row["utilization"] <= 1
    # At 0% malleable, Min is EASY (no job can change size); at 100% it is not.
    by = {(r["policy"], r["malleable"]): r for r in rows}
    assert by[("min", 0.0)]["mean_turnaround"] == by[("easy", 0.0)]["mean_turnaround"]
    assert by[("min", 100.0)]["expands_per_job"] > 0
    assert "requested time below run time" in err and "warm-up/drain-down" in err


def test_table_schedule_csv_and_plots(tmp_path: Path, shared_trace: Callable[[str], Path]) -> None:
    trace = small_trace(tmp_path, shared_trace("nasa"), jobs=300)
    schedule, plots = tmp_path / "schedule.csv", tmp_path / "plots"
    code, out, err = invoke(
        str(trace), "--policy", "easy,avg", "--seeds", "1", "--schedule-out", str(schedule), "--plot", str(plots)
    )
    assert code == 0, err
    assert "easy" in out and "avg" in out and "assumed equal to the actual run time" in out
    with schedule.open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:5] == ["job", "submit", "start", "end", "nodes"]
    assert len(rows) == 2 * 300
    assert {row["policy"] for row in rows} == {"easy", "avg"}
    assert all(float(row["end"]) >= float(row["start"]) >= float(row["submit"]) for row in rows)
    assert any(int(row["resizes"]) > 0 for row in rows if row["policy"] == "avg")
    for name in ("small-metrics.png", "small-utilization.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_jacobi_workload() -> None:
    code, out, err = invoke(
        "--workload", "jacobi", "--jobs", "16", "--gap", "90", "--policy", "elastic,rigid-min", "--seeds", "3", "--json"
    )
    assert code == 0, err
    rows = json.loads(out)
    assert [r["policy"] for r in rows] == ["elastic", "rigid-min"]
    assert all(r["jobs"] == 16 for r in rows)


def test_bad_input_names_the_flag_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.swf"
    bad.write_text("; MaxProcs: 8\n1 0 -1 10 2 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1\n2 5 -1 10 2\n")
    code, _, err = invoke(str(bad))
    assert code == 2 and "bad.swf:3: expected 18 fields, found 5" in err
    code, _, err = invoke(str(bad), "--malleable", "0,150")
    assert code == 2 and "--malleable" in err
    code, _, err = invoke(str(bad), "--policy", "elastic")
    assert code == 2 and "--policy" in err and "not a trace policy" in err
    code, _, err = invoke("--workload", "jacobi", "--policy", "min")
    assert code == 2 and "not a Jacobi-mix policy" in err
    code, _, err = invoke()
    assert code == 2 and "either a TRACE" in err
