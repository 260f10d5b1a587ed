"""`flux start --test-size` at scale (issue 45): brokers share what the forking parent computed once, keep only the
membership entries they were told about, beat less often in large instances, and the machine's limits are checked
(and soft ones raised) before the first fork; a fork that fails ends the start with one line and no broker left."""

from __future__ import annotations

import json
import os
import resource
import threading
import tracemalloc
from pathlib import Path

import pytest

from broker import testsize
from broker.bootstrap import BootstrapConfig, HostEntry
from broker.membership import DOWN, LOST, UP, Membership, Quorum
from broker.modules.dir_remover import DirRemover
from broker.testing import run_flux
from broker.testsize_limits import THREADS_PER_BROKER, LimitError, prepare_limits
from broker.topology import kary


def test_a_membership_of_2048_ranks_holds_only_the_ranks_it_was_told_about() -> None:
    hosts = [f"node{i}" for i in range(2048)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        members = Membership(hosts)
        members.set(5, UP, resources={"ncores": 2}, uuid="u5")
        members.set(6, UP)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 16_384  # two entries, not 2,048 (about 370 KB)
    assert members.count(UP) == 2 and members.in_state(UP) == [5, 6]
    assert members.state(7) == DOWN and members.ranks[7].hostname == "node7" and len(members.ranks) == 2048
    assert Quorum.parse("2", 2048).reached(members) and not Quorum.parse(None, 2048).reached(members)
    members.set(6, LOST)
    assert members.count(UP) == 1 and members.in_state(LOST) == [6]
    assert members.snapshot([5, 9]) == {
        "5": {
            "state": UP,
            "hostname": "node5",
            "resources": {"ncores": 2},
            "uuid": "u5",
            "since": members.info(5).since,
        },
        "9": {"state": DOWN, "hostname": "node9", "resources": None, "uuid": "", "since": members.info(9).since},
    }
    members.resize(hosts[:6])  # a release drops the trailing ranks and what they counted
    assert members.count(UP) == 1 and len(members.ranks) == 6
    with pytest.raises(IndexError):
        members.info(6)


def test_a_config_computes_its_host_views_once_and_the_tree_is_shared() -> None:
    hosts = [HostEntry(f"n{i}.example.org") for i in range(300)]
    config = BootstrapConfig((*hosts, HostEntry("n0.example.org")))
    config.prepare()
    assert config.hostnames is config.hostnames  # one list, made once, not one per question
    assert config.rank_of("n299.example.org") == 299 and config.rank_of("n0.example.org") == 0  # the first wins
    assert config.hostlist() == config.hostlist()
    assert kary(2048, 32) is kary(2048, 32) and kary(2048, 32).children(1) == list(range(33, 65))


def test_the_job_dir_remover_starts_its_thread_at_the_first_removal(tmp_path: Path) -> None:
    threads = threading.active_count()
    idle = DirRemover()
    idle.close()
    assert not idle.started and threading.active_count() == threads
    doomed = tmp_path / "job"
    doomed.mkdir()
    remover = DirRemover()
    remover.remove(str(doomed))
    remover.close()
    assert remover.started and not doomed.exists()


@pytest.mark.parametrize(
    ("size", "attrs", "expected"),
    [
        (256, [], []),
        (512, [], [("heartbeat.interval", "2")]),
        (2048, [], [("heartbeat.interval", "5")]),
        (16384, [], [("heartbeat.interval", "5")]),
        (2048, [("heartbeat.timeout", "10")], []),  # the user chose heartbeats: theirs
        (2048, [("heartbeat.interval", "0.5")], []),
    ],
)
def test_large_test_instances_beat_less_often_unless_told(
    size: int, attrs: list[tuple[str, str]], expected: list[tuple[str, str]]
) -> None:
    assert testsize.heartbeat_default(size, attrs) == expected


def _fake_proc(tmp_path: Path, pid_max: int, running: int) -> tuple[str, str]:
    (tmp_path / "pid_max").write_text(f"{pid_max}\n")
    (tmp_path / "threads-max").write_text("1000000\n")
    (tmp_path / "loadavg").write_text(f"0.10 0.20 0.30 2/{running} 4242\n")
    return str(tmp_path), str(tmp_path / "loadavg")


def test_a_size_past_the_kernel_s_task_limit_is_refused_naming_it(tmp_path: Path) -> None:
    proc, loadavg = _fake_proc(tmp_path, pid_max=32768, running=400)
    with pytest.raises(LimitError, match=r"kernel\.pid_max is 32,768 \(raise it: sysctl -w kernel\.pid_max="):
        prepare_limits(16384, proc=proc, loadavg=loadavg, is_root=True)
    prepare_limits(2048, proc=proc, loadavg=loadavg, is_root=True)  # 6,144 threads fit
    assert 2048 * THREADS_PER_BROKER + 400 < 32768


def test_soft_limits_are_raised_up_to_the_hard_ones(tmp_path: Path) -> None:
    proc, loadavg = _fake_proc(tmp_path, pid_max=4_000_000, running=100)
    saved = {limit: resource.getrlimit(limit) for limit in (resource.RLIMIT_NOFILE, resource.RLIMIT_NPROC)}
    try:
        _soft, hard = saved[resource.RLIMIT_NOFILE]
        low = min(512, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
        prepare_limits(1024, proc=proc, loadavg=loadavg, is_root=True)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == min(hard, 1024 + 256)
        nproc_soft, nproc_hard = saved[resource.RLIMIT_NPROC]
        if nproc_hard != resource.RLIM_INFINITY:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc_soft, nproc_hard))
            with pytest.raises(LimitError, match=r"ulimit -u"):
                prepare_limits(nproc_hard, proc=proc, loadavg=loadavg, is_root=False)
    finally:
        for limit, value in saved.items():
            resource.setrlimit(limit, value)


def test_24_brokers_report_their_own_rank_and_host_from_the_shared_measurement() -> None:
    script = "flux overlay status --json; flux resource R"
    done = run_flux("start", "--test-size=24", "--test-hosts=h[0-23]", "sh", "-c", script, timeout=120)
    assert done.returncode == 0, done.stderr
    overlay, rspec = (json.loads(line) for line in done.stdout.splitlines())
    assert [(r["rank"], r["hostname"], r["state"]) for r in overlay["ranks"]] == [
        (rank, f"h{rank}", "up") for rank in range(24)
    ]
    assert rspec["execution"]["R_lite"][0]["rank"] == "0-23"
    assert rspec["execution"]["nodelist"] == ["h[0-23]"]


def test_a_fork_that_fails_ends_the_start_with_one_line_and_no_broker_left(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_fork = os.fork
    started: list[int] = []

    def fork() -> int:
        if len(started) == 3:
            raise OSError(11, "Resource temporarily unavailable")
        pid = real_fork()
        if pid:
            started.append(pid)
        return pid

    monkeypatch.setattr(testsize, "choose_fork", lambda: (fork, ""))
    code = testsize.run_test_instance(6, ["sleep", "30"])
    assert code == 1 and len(started) == 3
    err = capsys.readouterr().err
    assert "flux-start: cannot start broker rank 3 of 6: fork: Resource temporarily unavailable" in err
    for pid in started:  # killed and reaped, not left running
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_a_broker_s_uuid_is_a_random_version_4_uuid_made_without_the_uuid_module() -> None:
    import uuid

    from broker.broker import uuid4_hex

    made = {uuid4_hex() for _ in range(64)}
    assert len(made) == 64
    for text in made:
        parsed = uuid.UUID(hex=text)
        assert parsed.hex == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_flux_start_sleeps_until_a_broker_exits_or_a_signal_comes_and_restores_signals_after() -> None:
    import select
    import signal

    before = signal.getsignal(signal.SIGCHLD)
    previous_fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(previous_fd)
    with testsize._Wakeups() as wakeups:
        assert signal.getsignal(signal.SIGCHLD) is testsize._on_child_exit
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        readable, _, _ = select.select([wakeups._read], [], [], 60)
        assert readable == [wakeups._read]  # the exit woke the waiting, not a poll
        wakeups.wait(0)  # drains what woke it
        assert select.select([wakeups._read], [], [], 0)[0] == []
        os.waitpid(pid, 0)
    assert signal.getsignal(signal.SIGCHLD) == before
    assert signal.set_wakeup_fd(previous_fd) == previous_fd  # the previous wakeup fd is back
