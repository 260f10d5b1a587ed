"""The burst service's loop against a lead and plugins that record what they are asked: it bursts for a pending
burstable job, shows why a job waits, survives failing plugins, tears down after the idle period; plugins come
from entry points, the selection function is replaceable."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from bursting.discovery import load_selector, plugin_factories
from bursting.lead import NodesView
from bursting.plugin import Burst, BurstError, BurstPlugin, LeadContext, Verdict
from bursting.policy import BurstNeed, QueuedJob
from bursting.reporter import Reporter
from bursting.service import BurstRefused, BurstService, UnknownBurst
from bursting.state_file import StateFile
from miniclusters.api.burst_plugins import BURST_PLUGIN_GROUP as GROUP
from miniclusters.api.burst_plugins import installed_burst_plugins as plugin_names
from miniclusters.kube_shapes import KubeObject
from tests.waiting import wait_until


class FakeLead:
    """The lead's side: jobs, ranks (bursts join when `join` is called), registered hosts, annotations."""

    def __init__(self, pods: int = 2) -> None:
        self.hostnames = [f"c-{i}" for i in range(pods)]
        self.pods = pods
        self.jobs_now: list[QueuedJob] = []
        self.burst_up: set[int] = set()
        self.annotations: dict[int, str] = {}
        self.released: list[str] = []

    def jobs(self) -> list[QueuedJob]:
        return list(self.jobs_now)

    def nodes(self) -> NodesView:
        return NodesView(self.pods, 2, tuple(self.hostnames), frozenset(self.burst_up))

    def register(self, prefix: str, hosts: list[str]) -> tuple[list[int], list[str]]:
        first = len(self.hostnames)
        self.hostnames += hosts
        return list(range(first, first + len(hosts))), list(self.hostnames)

    def release(self, prefix: str) -> None:
        self.released.append(prefix)
        self.hostnames = [h for h in self.hostnames if not h.startswith(prefix)]
        self.burst_up = {r for r in self.burst_up if r < len(self.hostnames)}

    def annotate(self, jobid: int, reason: str) -> None:
        self.annotations[jobid] = reason


class FakePlugin:
    def __init__(self, name: str, ok: bool = True, fail: str = "", crash: bool = False) -> None:
        self.name = name
        self.ok, self.fail, self.crash = ok, fail, crash
        self.launched: list[Burst] = []
        self.torn: list[str] = []

    def can_satisfy(self, nodes: int) -> Verdict:
        if self.crash:
            raise RuntimeError("kubeconfig: no such context 'gpu'")
        return Verdict(self.ok, "" if self.ok else "quota exceeded")

    def expose(self, burst: Burst) -> tuple[str, int]:
        return "10.9.9.9", 31000

    def launch(self, burst: Burst) -> None:
        if self.fail:
            raise BurstError(self.fail)
        self.launched.append(burst)

    def teardown(self, burst: Burst) -> None:
        self.torn.append(burst.name)


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def service(tmp_path: Path, lead: FakeLead, plugins: Mapping[str, BurstPlugin], **kw: object) -> BurstService:
    return BurstService("c", lead, plugins, StateFile(tmp_path / "bursts.json"), log=lambda _t: None, **kw)  # type: ignore[arg-type]


def test_a_pending_burstable_job_gets_a_burst_which_is_torn_down_after_its_jobs_and_the_idle_period(
    tmp_path: Path,
) -> None:
    lead, local, clock = FakeLead(), FakePlugin("local"), Clock()
    svc = service(tmp_path, lead, {"local": local}, idle_period=30.0, clock=clock)
    lead.jobs_now = [QueuedJob(7, "SCHED", 4, 4, True)]
    svc.step()
    assert [(b.name, b.nodes, b.lead_hosts, b.lead_address, b.lead_port) for b in local.launched] == [
        ("c-b1", 2, ("c-0", "c-1"), "10.9.9.9", 31000)
    ]
    assert lead.hostnames == ["c-0", "c-1", "c-b1-0", "c-b1-1"]
    assert lead.annotations[7] == "waiting for burst c-b1: 2 node(s) via local"
    svc.step()  # still coming up: no second burst for the same job
    assert len(local.launched) == 1
    lead.burst_up = {2, 3}
    lead.jobs_now = [QueuedJob(7, "RUN", 4, 4, True, (0, 1, 2, 3))]
    svc.step()
    assert StateFile(tmp_path / "bursts.json").read().bursts["c-b1"].state == "up"
    lead.jobs_now = [QueuedJob(7, "INACTIVE", 4, 4, True, (0, 1, 2, 3))]
    svc.step()  # idle from now
    clock.now += 29
    svc.step()
    assert local.torn == []
    clock.now += 1
    svc.step()
    assert local.torn == ["c-b1"] and lead.released == ["c-b1-"]
    assert lead.hostnames == ["c-0", "c-1"]
    assert StateFile(tmp_path / "bursts.json").read().bursts == {}


def test_credentials_and_reachability_problems_leave_the_job_pending_with_the_reason(tmp_path: Path) -> None:
    lead = FakeLead()
    lead.jobs_now = [QueuedJob(9, "SCHED", 3, 3, True)]
    crashing, refusing = FakePlugin("kubernetes", crash=True), FakePlugin("local", ok=False)
    svc = service(tmp_path, lead, {"local": refusing, "kubernetes": crashing})
    svc.step()  # no exception escapes
    assert lead.annotations[9] == (
        "burst of 1 node(s) not possible: local: quota exceeded; "
        "kubernetes: RuntimeError: kubeconfig: no such context 'gpu'"
    )
    assert StateFile(tmp_path / "bursts.json").read().pending == {"9": lead.annotations[9]}
    failing = FakePlugin("kubernetes", fail="Service 'c-b1-lead': waiting for the LoadBalancer's address")
    svc = service(tmp_path, lead, {"kubernetes": failing})
    svc.step()
    assert lead.annotations[9] == (
        "burst c-b1 (kubernetes) failed: Service 'c-b1-lead': waiting for the LoadBalancer's address"
    )
    assert failing.torn == ["c-b1"] and lead.released == ["c-b1-"]  # nothing half-made is left registered


def test_the_selection_function_is_replaceable(tmp_path: Path) -> None:
    lead = FakeLead()
    lead.jobs_now = [QueuedJob(1, "SCHED", 4, 4, True)]
    local, kube = FakePlugin("local"), FakePlugin("kubernetes")
    svc = service(
        tmp_path, lead, {"local": local, "kubernetes": kube}, selector=load_selector(f"{__name__}:prefer_kube")
    )
    svc.step()
    assert kube.launched and not local.launched
    with pytest.raises(ValueError, match="expected module:function"):
        load_selector("nonsense")


def prefer_kube(need: BurstNeed, verdicts: Mapping[str, Verdict]) -> str | None:
    return "kubernetes" if verdicts["kubernetes"].ok else None


def test_plugins_are_discovered_through_entry_points() -> None:
    assert GROUP == "miniclusters.burst_plugins"
    names = plugin_names()
    assert names[0] == "local" and "kubernetes" in names  # local first: the default selector's preference
    factories = plugin_factories(["local", "kubernetes"])
    context = LeadContext("c", {"spec": {}}, "", options={"state_dir": "/nonexistent"})
    for name, factory in factories.items():
        made = factory(context)
        assert isinstance(made, BurstPlugin) and made.name == name
    with pytest.raises(LookupError, match="no burst plugin 'nope'"):
        plugin_factories(["nope"])


def test_a_burst_whose_brokers_never_join_fails_with_the_reason_and_is_removed(tmp_path: Path) -> None:
    lead, local, clock = FakeLead(), FakePlugin("local"), Clock()
    svc = service(tmp_path, lead, {"local": local}, idle_period=10.0, clock=clock)
    lead.jobs_now = [QueuedJob(5, "SCHED", 3, 3, True)]
    svc.step()
    clock.now += 181  # the burst's brokers never joined (say, the lead's address is unreachable from there)
    svc.step()
    assert lead.annotations[5] == "burst c-b1 (local) failed: its brokers did not join the lead within 180 s"
    clock.now += 11
    svc.step()
    assert local.torn == ["c-b1"] and lead.released == ["c-b1-"]


def test_a_burst_made_by_hand_stays_until_used_then_idles(tmp_path: Path) -> None:
    lead, local, clock = FakeLead(), FakePlugin("local"), Clock()
    svc = service(tmp_path, lead, {"local": local}, idle_period=10.0, clock=clock)
    record = svc.burst("local", 1, manual=True)
    assert record.ranks == [2] and lead.hostnames[-1] == "c-b1-0"
    lead.burst_up = {2}
    svc.step()
    clock.now += 100
    svc.step()
    assert local.torn == []  # never used: kept (minicluster burst --release removes it)
    lead.jobs_now = [QueuedJob(3, "RUN", 3, 3, False, (0, 1, 2))]
    svc.step()
    lead.jobs_now = [QueuedJob(3, "INACTIVE", 3, 3, False, (0, 1, 2))]
    svc.step()
    clock.now += 10
    svc.step()
    assert local.torn == ["c-b1"]


def test_a_burst_by_hand_obeys_the_limit_the_loop_asks_the_plugin_about(tmp_path: Path) -> None:
    lead, refusing = FakeLead(), FakePlugin("local", ok=False)
    svc = service(tmp_path, lead, {"local": refusing})
    with pytest.raises(BurstRefused, match="local: quota exceeded"):
        svc.burst("local", 5, manual=True)
    assert refusing.launched == [] and lead.hostnames == ["c-0", "c-1"]  # nothing registered, nothing launched
    assert StateFile(tmp_path / "bursts.json").read().bursts == {}


def test_the_spec_s_size_is_every_plugin_s_limit() -> None:
    spec: KubeObject = {
        "spec": {"flux": {"bursting": {"plugins": [{"name": "local", "size": 2}, {"name": "kubernetes"}]}}}
    }
    context = LeadContext("c", spec, "")
    assert context.size_limit("local") == 2 and context.size_limit("kubernetes") is None
    local = plugin_factories(["local"])["local"](LeadContext("c", spec, "", options={"state_dir": "/nonexistent"}))
    assert local.can_satisfy(2).ok and not local.can_satisfy(3).ok


def test_releasing_a_burst_that_is_not_there_says_which_are(tmp_path: Path) -> None:
    lead, local = FakeLead(), FakePlugin("local")
    svc = service(tmp_path, lead, {"local": local})
    svc.burst("local", 1, manual=True)
    with pytest.raises(UnknownBurst, match=r"no burst 'c-b7' of c \(its bursts: c-b1\)"):
        svc.release("c-b7")
    assert local.torn == [] and lead.released == []
    svc.release("c-b1")
    assert local.torn == ["c-b1"]


def test_a_burst_whose_broker_is_lost_fails_and_goes_once_its_job_has_ended(tmp_path: Path) -> None:
    lead, local, clock = FakeLead(), FakePlugin("local"), Clock()
    svc = service(tmp_path, lead, {"local": local}, idle_period=5.0, clock=clock)
    lead.jobs_now = [QueuedJob(7, "SCHED", 3, 3, True)]
    svc.step()
    lead.burst_up = {2}
    lead.jobs_now = [QueuedJob(7, "RUN", 3, 3, True, (0, 1, 2))]
    svc.step()
    lead.burst_up = set()  # its broker was killed: the lead has it lost, and fails the job
    svc.step()
    record = StateFile(tmp_path / "bursts.json").read().bursts["c-b1"]
    assert record.state == "failed" and record.reason == "its broker rank(s) 2 left the lead (lost or down)"
    lead.jobs_now = [QueuedJob(7, "INACTIVE", 3, 3, True, (0, 1, 2))]
    svc.step()
    clock.now += 5
    svc.step()
    assert local.torn == ["c-b1"] and lead.released == ["c-b1-"]


def test_a_failing_step_is_reported_and_the_loop_goes_on(tmp_path: Path) -> None:
    class Broken(FakeLead):
        calls = 0

        def jobs(self) -> list[QueuedJob]:
            self.calls += 1
            if self.calls == 2:
                raise KeyError("state")
            return []

    lead = Broken()
    heard: list[tuple[str, str]] = []
    svc = service(tmp_path, lead, {"local": FakePlugin("local")})
    svc.run(interval=0, stop=lambda: lead.calls >= 3, on_state=lambda s, r: heard.append((s, r)))
    assert heard == [("running", ""), ("failed", "its last step failed: KeyError: 'state'"), ("running", "")]


def test_the_reporter_tells_the_lead_its_state_and_its_last_word() -> None:
    sent: list[tuple[str, str]] = []
    down = [True]

    def send(state: str, reason: str) -> None:
        if down[0]:
            down[0] = False
            raise ConnectionError("the lead is not up yet")
        sent.append((state, reason))

    reporter = Reporter(send, period=0.05)
    reporter.start()
    wait_until("the reporter's first report", lambda: sent, timeout=10)
    assert sent[0] == ("running", "")  # retried after the lead did not answer
    reporter.set("failed", "its last step failed: boom")
    assert reporter.stop("stopped", "stopped by SIGTERM", timeout=10)
    assert sent[-1] == ("stopped", "stopped by SIGTERM")


def test_a_reporter_never_started_still_delivers_why_the_service_gave_up() -> None:
    sent: list[tuple[str, str]] = []
    reporter = Reporter(lambda state, reason: sent.append((state, reason)), period=0.05)
    assert reporter.stop("failed", "--idle: 'soon' is not a duration", timeout=10)
    assert sent == [("failed", "--idle: 'soon' is not a duration")]
