"""The SWF reader: all 18 fields, -1 unknown, header sizes, malformed lines named by line number."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from elasticity.sim.swf import FIELDS, SWFError, parse_swf, read_swf
from elasticity.sim.workload import from_swf, with_malleable

GOOD = """\
; Version: 2.2
; MaxNodes: 64
; MaxProcs: 128
    1   0   5  100   8  -1 -1  16  200 -1 1 3 4 5 6 7 -1 -1
    2  10  -1   50   4  -1 -1  -1   -1 -1 1 3 4 5 6 7  1 30
    3  20  -1   -1   4  -1 -1   4   60 -1 5 3 4 5 6 7 -1 -1
    4  30  -1   70   2  -1 -1   2   40 -1 1 3 4 5 6 7 -1 -1
"""


def test_every_field_and_the_header() -> None:
    trace = parse_swf(GOOD.splitlines(), "t.swf")
    assert len(FIELDS) == 18
    first = trace.jobs[0]
    assert (first.job, first.submit, first.wait, first.run_time, first.allocated_procs) == (1, 0, 5, 100, 8)
    assert (first.requested_procs, first.requested_time, first.status, first.user, first.partition) == (
        16,
        200,
        1,
        3,
        7,
    )
    assert trace.jobs[1].think_time == 30 and trace.jobs[1].preceding_job == 1
    assert trace.machine_size == 128  # MaxProcs: job sizes are processors
    # Size: requested processors (field 8), else allocated (field 5).
    assert [job.size for job in trace.jobs] == [16, 4, 4, 2]


def test_workload_states_its_assumptions() -> None:
    work = from_swf(parse_swf(GOOD.splitlines(), "t.swf"))
    assert [job.job for job in work.jobs] == [1, 2, 4]  # job 3 has an unknown run time
    assert work.jobs[1].estimate == 50  # unknown requested time -> the run time
    assert work.jobs[2].estimate == 70  # requested 40 < ran 70 -> raised
    notes = " | ".join(work.notes)
    assert "requested time unknown for 1 jobs: assumed equal to the actual run time" in notes
    assert "raised to the run time" in notes and "dropped 1 jobs with unknown run time" in notes
    assert from_swf(parse_swf(GOOD.splitlines()), nodes=32).nodes == 32


def test_malleable_share_is_exact_and_seeded() -> None:
    work = from_swf(parse_swf(GOOD.splitlines(), "t.swf"))
    half = with_malleable(work, 66.7, seed=3)
    assert sum(job.size.malleable or job.size.pref == 1 for job in half.jobs) >= 1
    chosen = [job.model.serial_fraction > 0 for job in half.jobs]
    assert sum(chosen) == 2  # round(3 * 0.667)
    assert chosen == [job.model.serial_fraction > 0 for job in with_malleable(work, 66.7, seed=3).jobs]
    with pytest.raises(ValueError, match=r"0\.\.100"):
        with_malleable(work, 120, seed=0)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("    5  40  -1   70   2  -1 -1   2   40 -1 1 3 4 5 6 7 -1", "t.swf:5: expected 18 fields, found 17"),
        ("    5  40  -1   7x   2  -1 -1   2   40 -1 1 3 4 5 6 7 -1 -1", "t.swf:5: field 'run_time' is not a number"),
        (
            "    5  40  -1   70 2.5  -1 -1   2   40 -1 1 3 4 5 6 7 -1 -1",
            "t.swf:5: field 'allocated_procs' must be an integer",
        ),
    ],
)
def test_malformed_lines_are_reported_with_their_line_number(line: str, message: str) -> None:
    lines = [*GOOD.splitlines()[:4], line, *GOOD.splitlines()[4:]]
    with pytest.raises(SWFError, match=message):
        parse_swf(lines, "t.swf")


def test_every_shared_trace_reads(shared_trace: Callable[[str], Path]) -> None:
    # The README says 3,171 HPC2N jobs: its file ends with a blank line, which is not a job.
    counts = {key: len(read_swf(shared_trace(key)).jobs) for key in ("sdsc", "hpc2n", "nasa", "lublin")}
    assert counts == {"sdsc": 4961, "hpc2n": 3170, "nasa": 18239, "lublin": 10000}
    assert read_swf(shared_trace("hpc2n")).machine_size == 240
