"""`flux resource status` and `flux job id` of the built-in `flux`, in flux-core's form (test_flux_parity.py compares
them with real flux-core; these run without it): the table's rows and columns, Flux's format sentinels, and ids
converted between spellings from arguments or stdin."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from broker.cli import resource_status as rs
from broker.cli.output_format import FormatError, OutputFormat
from broker.jobs.jobid import encode_jobid, parse_jobid
from broker.testing import FLUX, Instance, render_instance, run_flux, wait_for

HOSTS = [f"node{i}" for i in range(4)]


def _snap(up: set[int], allocated: set[int] = frozenset(), drain: set[int] = frozenset()) -> rs.Snapshot:  # type: ignore[assignment]
    everyone = set(range(len(HOSTS)))
    return rs.Snapshot(everyone, up, everyone - up, set(allocated) & up, set(drain), HOSTS)


def _table(
    snap: rs.Snapshot, states: str | None = None, fmt: str = "{state} {nnodes} {nodelist}", **kw: bool
) -> list[str]:
    formatter = OutputFormat(rs.format_string(fmt), rs.HEADINGS)
    lines = rs.status_lines(
        snap, rs.state_list(states), formatter, explicit_states=bool(states), **{"skip_empty": False, **kw}
    )
    return formatter.render(lines, no_header=True)


def test_default_rows_split_states_by_online_and_leave_out_empty_ones() -> None:
    # rank 3 down; rank 1 drained but still running a job (draining), rank 2 drained and idle
    snap = _snap(up={0, 1, 2}, allocated={0, 1}, drain={1, 2})
    assert _table(snap) == ["avail 1 node0", "avail* 1 node3", "draining 1 node1", "drained 1 node2"]


def test_named_states_show_empty_rows_unless_skip_empty() -> None:
    snap = _snap(up={0, 1, 2, 3})
    assert _table(snap, "allocated,drain") == ["allocated 0 ", "draining 0 ", "drained 0 "]
    assert _table(snap, "allocated,drain", skip_empty=True) == []


def test_online_or_offline_alone_means_only_those_nodes_in_the_default_states() -> None:
    snap = _snap(up={0, 1}, drain={3})
    assert _table(snap, "offline") == [
        "avail* 1 node2",
        "exclude* 0 ",
        "torpid* 0 ",
        "housekeeping* 0 ",
        "drained* 1 node3",
    ]
    assert _table(snap, "online", skip_empty=True) == ["avail 2 node[0-1]"]


def test_drained_rows_of_one_reason_merge_and_drain_names_both_states() -> None:
    snap = _snap(up={0, 1, 2, 3}, drain={1, 2, 3})
    assert _table(snap, "drain", fmt="{statex} {ranks}", skip_empty=True) == ["drained 1-3"]
    assert rs.state_list("drain") == ["draining", "drained"]


def test_bad_states_and_formats_are_named() -> None:
    with pytest.raises(rs.StatusError, match="Invalid resource state bogus") as caught:
        rs.state_list("avail,bogus")
    assert "valid states: all,online" in caught.value.hint
    with pytest.raises(FormatError, match="Unknown format field: colour"):
        OutputFormat("{state} {colour}", rs.HEADINGS)
    with pytest.raises(rs.StatusError, match=r"No such format nodes \(Did you mean '\{nodes\}'\?\)"):
        rs.format_string("nodes")


def test_default_format_without_colour_has_flux_cores_columns() -> None:
    """Dropping {color_up} drops the space before it too, in flux-core as here: the header reads `STATEUP`."""
    formatter = OutputFormat(rs.format_string("default"), rs.HEADINGS).without(["color_up", "color_off"])
    row = rs.StatusLine("avail", True, {0, 1}, HOSTS.__getitem__)
    assert formatter.render([row]) == ["       STATEUP NNODES NODELIST", "       avail ✔      2 node[0-1]"]
    coloured = OutputFormat(rs.format_string("default"), rs.HEADINGS).format(row)
    assert coloured.startswith("       avail \033[01;32m ✔\033[0;0m")


def test_format_sentinels_drop_empty_columns_and_widen_to_the_widest_value() -> None:
    rows = [
        rs.StatusLine("avail", True, {0}, HOSTS.__getitem__),
        rs.StatusLine("drained", False, {1}, HOSTS.__getitem__),
    ]
    dropped = OutputFormat("{state} ?:{reason} {ranks}", rs.HEADINGS)
    assert dropped.render(rows) == ["STATE RANKS", "avail 0", "drained* 1"]
    widened = OutputFormat("+:{state:<3.3}|{ranks:>3}", rs.HEADINGS)
    assert widened.render(rows) == ["STATE   |RANKS", "avail   |  0", "drained*|  1"]
    cut = OutputFormat("{state:<4.4+}|", rs.HEADINGS)
    assert cut.render(rows, no_header=True) == ["ava+|", "dra+|"]


# ------------------------------------------------------------------------------------------ in an instance
@pytest.fixture(scope="module")
def inst(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    """Three hosts, two brokers started: node2 is offline."""
    instance = render_instance(tmp_path_factory.mktemp("rstatus"), 3)
    for rank in (0, 1):
        instance.start(rank, "-Sresource.cores=0-1", "-Sbroker.quorum=2")
    instance.wait_states({0: "up", 1: "up"}, timeout=30)
    yield instance
    instance.cleanup()


def test_status_shows_offline_draining_and_allocated_nodes(inst: Instance) -> None:
    env = dict(os.environ, FLUX_URI=inst.uri(0))
    job = run_flux("submit", "-N2", "sleep", "60", env=env).stdout.strip()
    assert wait_for(lambda: "R" in run_flux("jobs", "-no", "{state_single}", job, env=env).stdout, timeout=30)
    assert run_flux("resource", "drain", "1", env=env).returncode == 0
    try:
        table = run_flux("resource", "status", env=env)
        assert table.returncode == 0, table.stderr
        assert table.stdout.splitlines() == [
            "       STATEUP NNODES NODELIST",
            "       avail ✔      1 node0",
            "      avail* ✗      1 node2",
            "    draining ✔      1 node1",  # drained while its job runs
        ]
        allocated = run_flux("resource", "status", "-s", "allocated", "-no", "{state} {ranks} {up.ascii}", env=env)
        assert allocated.stdout.splitlines() == ["allocated 0-1 y"]
        only = run_flux("resource", "status", "-i", "node[1-2]", "-no", "{state} {nodelist}", env=env)
        assert only.stdout.splitlines() == ["avail* node2", "draining node1"]
        bad = run_flux("resource", "status", "-s", "up", env=env)
        assert bad.returncode == 2 and "Invalid resource state up specified" in bad.stderr and not bad.stdout
    finally:
        run_flux("cancel", job, env=env)
        run_flux("resource", "undrain", "1", env=env)


# ------------------------------------------------------------------------------------------ flux job id
def _job_id(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLUX_URI"}  # needs no instance
    return subprocess.run([FLUX, "job", "id", *args], input=stdin, capture_output=True, text=True, env=env, timeout=60)


def test_job_id_converts_arguments_or_stdin_lines() -> None:
    ids = [0, 2**63 + 5, 2**64 - 1]
    dothex = _job_id("--to=dothex", *map(str, ids))
    assert dothex.returncode == 0, dothex.stderr
    assert [parse_jobid(line) for line in dothex.stdout.splitlines()] == ids
    back = _job_id(stdin="".join(f"  {encode_jobid(i, 'kvs')}  \n" for i in ids))
    assert back.returncode == 0 and back.stdout.split() == [str(i) for i in ids]
    refused = _job_id("-t", "emoji", "1")
    assert refused.returncode != 0 and "emoji table" in refused.stderr


def test_job_id_stops_at_the_first_malformed_id_and_refuses_an_unknown_encoding() -> None:
    partial = _job_id("12", "nonsense", "13")
    assert partial.returncode == 1 and partial.stdout.split() == ["12"]
    assert partial.stderr.strip() == "flux-job: nonsense: malformed input"
    unknown = _job_id("--to=base64", "12")
    assert unknown.returncode == 2 and not unknown.stdout and "Unknown to=base64" in unknown.stderr
    assert _job_id(stdin="").returncode == 1  # no id at all fails, as in flux-core
