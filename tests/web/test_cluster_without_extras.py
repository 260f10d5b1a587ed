"""/cluster's figures in a pod given the broker bundle without its extras (no numpy, no matplotlib): the page
shows no figure instead of failing (images/broker/bundle_parts.py says what the extras are)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from broker.rest.web import cluster
from broker.rest.web.figures import controller_figure, controller_log, latest_profile
from elasticity.control.events import EventLog

PLOTTING = ("numpy", "matplotlib")
NEEDING_THEM = ("elasticity.profiling", "elasticity.figures", "elasticity.control.timeline", "elasticity.sim")


@pytest.fixture
def without_plotting(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a pod's core copy: importing numpy or matplotlib fails, and nothing that needs them is loaded yet."""
    for name in list(sys.modules):
        if name.split(".")[0] in PLOTTING or name.startswith(NEEDING_THEM):
            monkeypatch.delitem(sys.modules, name)
    for name in PLOTTING:
        monkeypatch.setitem(sys.modules, name, None)


def _multiplex_log(state_dir: Path) -> None:
    log = controller_log(state_dir, "multiplex")
    log.parent.mkdir(parents=True)
    log.write_text('{"t": 0, "event": "controller-start", "allocatable_m": 4000}\n{"t": 1, "event": "resize"}\n')


def test_the_plotting_stack_is_really_missing(without_plotting: None) -> None:
    with pytest.raises(ModuleNotFoundError):
        import elasticity.profiling.profile  # noqa: F401


def test_a_controller_timeline_without_matplotlib_is_no_figure(without_plotting: None, tmp_path: Path) -> None:
    _multiplex_log(tmp_path)
    assert controller_figure(tmp_path, "multiplex") is None


def test_the_last_profile_without_numpy_is_none(without_plotting: None, tmp_path: Path) -> None:
    assert latest_profile(tmp_path, [], lambda job: None) is None


def test_a_campaign_s_members_need_no_extra(without_plotting: None, tmp_path: Path) -> None:
    """The member table is plain Python (only its timeline is drawn): it shows in a pod without the extras."""
    clock = iter(range(10)).__next__
    with EventLog(controller_log(tmp_path, "campaign"), "campaign", lambda: float(clock())) as log:
        log.write("submitted", "c", t=0.0, ensemble="alpha", job="f1", members=1)
        log.write("member", "c", t=2.0, ensemble="alpha", member="alpha-0", state="running")
    assert [row["member"] for row in cluster._campaign(tmp_path)] == ["alpha-0"]
