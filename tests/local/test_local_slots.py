"""Network slots are claimed machine-wide: clusters in different state directories never share a bridge, and one
cluster's teardown never deletes another's bridge or veths (which took a running cluster's pods off the network,
froze its MPI jobs and, 30 s later, its follower brokers)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from miniclusters.backends.local import netns, plan, slots
from miniclusters.backends.local.backend import LocalBackend
from miniclusters.backends.local.state import STATE_FILE


def _owner(root: Path, name: str, slot: int | None) -> Path:
    owner = root / name
    owner.mkdir(parents=True)
    if slot is not None:
        (owner / STATE_FILE).write_text(json.dumps({"slot": slot}))
    return owner


def _first_free(busy: set[int]) -> int:
    return min(set(range(1, 255)) - busy)


def test_claims_give_distinct_slots_and_release_only_their_own(tmp_path: Path) -> None:
    claims = tmp_path / "claims"
    a, b = _owner(tmp_path, "a", None), _owner(tmp_path, "b", None)
    slot_a = slots.claim(a, _first_free, claims)
    slot_b = slots.claim(b, _first_free, claims)
    assert slot_a != slot_b
    assert slots.claim(a, lambda busy: slot_a if slot_a not in busy else -1, claims) == slot_a  # its own is free
    assert slots.held_by_other(a, slot_b, claims) and not slots.held_by_other(b, slot_b, claims)
    slots.release(a, claims)
    assert slots.live_claims(claims) == {slot_b: b}


def test_a_claim_is_stale_once_its_owner_is_gone_after_the_grace_period(tmp_path: Path) -> None:
    claims = tmp_path / "claims"
    live = _owner(tmp_path, "live", 3)
    gone = tmp_path / "gone"  # its cluster was removed without releasing (a crash)
    moved = _owner(tmp_path, "moved", 9)  # its record names another slot now
    for slot, owner in ((3, live), (4, gone), (5, moved)):

        def this_slot(_busy: set[int], s: int = slot) -> int:
            return s

        slots.claim(owner, this_slot, claims)
    old = time.time() - slots.CLAIM_GRACE_S - 1
    for slot in (3, 4, 5):
        os.utime(claims / str(slot), (old, old))
    assert slots.live_claims(claims) == {3: live}
    assert slots.live_claims(claims, now=old + 1) == {3: live, 4: gone, 5: moved}  # young claims are live
    assert slots.claim(_owner(tmp_path, "new", None), _first_free, claims) == 1
    assert slots.claim(_owner(tmp_path, "newer", None), lambda busy: min({4, 5} - busy), claims) == 4


@pytest.mark.needs_root
def test_another_state_directorys_teardown_leaves_a_running_cluster_alone(
    mc: Any, machine: Any, spec_writer: Any
) -> None:
    up = mc("up", str(spec_writer(machine.state_dir, "keep", size=2, max_size=2)), "--detach")
    assert up.returncode == 0, up.stderr
    record = json.loads((machine.state_dir / "keep" / STATE_FILE).read_text())
    slot = record["slot"]

    other = Path(tempfile.mkdtemp(prefix="mcs", dir="/tmp"))
    try:
        # a second cluster elsewhere gets its own slot ...
        env = {"MINICLUSTERS_STATE_DIR": str(other)}
        second = mc("up", str(spec_writer(other, "next", size=1, max_size=1)), "--detach", env=env)
        assert second.returncode == 0, second.stderr
        assert json.loads((other / "next" / STATE_FILE).read_text())["slot"] != slot
        assert mc("down", "next", env=env).returncode == 0
        # ... and a stale record that names this cluster's slot (left by a crash) is removed without touching it
        ghost = dict(record, name="ghost", pods={})
        (other / "ghost").mkdir()
        (other / "ghost" / STATE_FILE).write_text(json.dumps(ghost))
        LocalBackend(state_dir=other, notify=lambda _m: None).delete("ghost")
    finally:
        shutil.rmtree(other, ignore_errors=True)

    assert netns.link_exists(plan.bridge_name(slot)) and netns.link_exists(plan.veth_name(slot, 1))
    for index in (0, 1):  # both pods still have their end of the veth, with their address
        eth0 = subprocess.run(["ip", "-n", plan.netns_name("keep", index), "-4", "-o", "addr", "show", "dev", "eth0"],
                              capture_output=True, text=True)  # fmt: skip
        assert record["pods"][str(index)]["address"] in eth0.stdout, eth0.stderr
    run = mc("exec", "keep", "--", "flux", "run", "-N", "2", "hostname")
    assert run.returncode == 0 and sorted(run.stdout.split()) == ["keep-0", "keep-1"], run.stderr
