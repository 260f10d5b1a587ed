"""Job ids, states, jobspecs, the journal and replay: the pure core of the job manager."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.jobs.jobid import (
    ENCODINGS,
    TABLE_ENCODINGS,
    FluidGenerator,
    JobIdError,
    encode_f58,
    encode_jobid,
    parse_jobid,
)
from broker.jobs.jobspec import JobspecError, build_jobspec, parse_jobspec
from broker.jobs.journal import JobEvent, Journal, JournalError
from broker.jobs.record import replay
from broker.jobs.states import JobResult, JobState, TransitionError, check_transition, parse_states


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_f58_round_trips(jobid: int) -> None:
    text = encode_f58(jobid)
    assert text.startswith("ƒ")
    assert parse_jobid(text) == jobid
    assert parse_jobid("f" + text[1:]) == jobid
    assert parse_jobid(str(jobid)) == jobid
    assert parse_jobid(hex(jobid)) == jobid
    assert parse_jobid("job." + encode_jobid(jobid, "dothex")) == jobid  # the KVS spelling


def test_known_f58_value() -> None:
    # Flux prints job id 1 as ƒ2 and 58 as ƒ21 (F58 digits start at '1').
    assert encode_f58(0) == "ƒ1" and encode_f58(1) == "ƒ2" and encode_f58(58) == "ƒ21"


@pytest.mark.parametrize("bad", ["", "ƒ0", "fI", "12a", "0xzz", "hello"])
def test_bad_jobids(bad: str) -> None:
    with pytest.raises(JobIdError):
        parse_jobid(bad)


@given(
    st.integers(min_value=0, max_value=2**64 - 1), st.sampled_from([e for e in ENCODINGS if e not in TABLE_ENCODINGS])
)
def test_every_flux_encoding_round_trips(jobid: int, to: str) -> None:
    """`flux job id --to=X` output parses back to the same id, whatever X (flux-core detects the spelling)."""
    text = encode_jobid(jobid, to)
    assert parse_jobid(text) == jobid
    assert parse_jobid(encode_jobid(jobid, to.upper())) == jobid  # flux-core takes the name in any case


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_encodings_have_flux_cores_shapes(jobid: int) -> None:
    dothex = encode_jobid(jobid, "dothex")
    assert [len(group) for group in dothex.split(".")] == [4, 4, 4, 4]
    assert encode_jobid(jobid, "kvs") == "job." + dothex
    assert int(encode_jobid(jobid, "hex"), 16) == jobid == int(encode_jobid(jobid, "dec"))
    assert encode_jobid(jobid, "f58plain") == "f" + encode_f58(jobid)[1:]


def test_f58_prefix_follows_the_locale_as_in_flux_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLUX_F58_FORCE_ASCII", raising=False)
    utf8 = __import__("locale").nl_langinfo(__import__("locale").CODESET) == "UTF-8"
    assert encode_jobid(58, "f58") == ("ƒ21" if utf8 else "f21")
    monkeypatch.setenv("FLUX_F58_FORCE_ASCII", "1")
    assert encode_jobid(58, "f58") == "f21"


@pytest.mark.parametrize(
    "text",
    [
        "0000.0000.0000.00001",  # a dothex group of 5 digits
        "1.2.3",  # three groups
        "ƒ" + "z" * 13,  # F58 longer than flux-core's 12 digits
        "18446744073709551616",  # 2**64
        "0x1_0",
        "😃" * 8,
    ],
)
def test_malformed_ids_in_every_spelling_are_refused(text: str) -> None:
    with pytest.raises(JobIdError):
        parse_jobid(text)


@pytest.mark.parametrize(("kind", "text"), [("words", "ariel-verbal-zodiac--october-paper-caravan"), ("emoji", "😩📨")])
def test_words_and_emoji_are_recognised_and_refused_with_the_reason(kind: str, text: str) -> None:
    """Their tables are flux-core's own data, which we do not copy: the error says so instead of "malformed"."""
    with pytest.raises(JobIdError, match=f"{kind} spelling .* flux-core's {kind} table"):
        parse_jobid(text)
    with pytest.raises(JobIdError, match=f"{kind} spelling"):
        encode_jobid(1, kind)


def test_fluids_increase_and_respect_a_floor() -> None:
    generator = FluidGenerator()
    ids = [generator.next() for _ in range(3000)]  # more than 1024 per millisecond forces a carry
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    floor = ids[-1] + (10**6 << 24)
    assert FluidGenerator().next(not_before=floor) > floor


def test_state_machine() -> None:
    check_transition(JobState.SCHED, JobState.RUN)
    with pytest.raises(TransitionError):
        check_transition(JobState.INACTIVE, JobState.RUN)
    assert parse_states("pending") == JobState.DEPEND | JobState.PRIORITY | JobState.SCHED
    assert parse_states("R,cleanup") == JobState.RUN | JobState.CLEANUP
    assert JobResult.TIMEOUT.short == "TO" and JobState.SCHED.short == "S"
    with pytest.raises(ValueError, match="unknown job state"):
        parse_states("bogus")


def test_jobspec_shapes_match_flux_submit() -> None:
    spec = parse_jobspec(build_jobspec(["hostname"], ntasks=4, nnodes=2, cores_per_task=2, duration=60))
    assert spec.resources.nnodes == 2 and spec.resources.ntasks == 4 and spec.resources.cores_per_task == 2
    assert spec.resources.tasks_per_node() == [2, 2]
    assert spec.duration == 60 and spec.name == "hostname"
    uneven = parse_jobspec(build_jobspec(["a"], ntasks=5, nnodes=2))
    assert uneven.resources.ntasks == 5 and uneven.resources.tasks_per_node() == [3, 2]
    flat = parse_jobspec(build_jobspec(["a"], ntasks=3))
    assert flat.resources.nnodes is None and flat.resources.total_cores == 3
    burst = parse_jobspec(build_jobspec(["a"], system_attributes={"burstable": True}))
    assert burst.attributes["system"]["burstable"] is True
    exclusive = parse_jobspec(build_jobspec(["a"], nnodes=2, exclusive=True))
    assert exclusive.resources.exclusive


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda j: j.update(version=2), "version"),
        (lambda j: j["tasks"][0].update(command=[]), "tasks[0].command"),
        (lambda j: j["resources"][0].update(count=0), "resources[0].count"),
        (lambda j: j["resources"][0].update(type="socket"), "resources[0].type"),
        (lambda j: j["attributes"]["system"].update(duration=-1), "attributes.system.duration"),
        (lambda j: j["attributes"]["system"].update(duration=float("inf")), "attributes.system.duration"),
        (lambda j: j["attributes"]["system"].update(duration=float("nan")), "attributes.system.duration"),
        (lambda j: j["attributes"]["system"].update(environment={"A": 1}), "attributes.system.environment"),
    ],
)
def test_bad_jobspecs_name_the_field(mutate, field: str) -> None:
    jobspec = build_jobspec(["true"], ntasks=2)
    mutate(jobspec)
    with pytest.raises(JobspecError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_jobspec(jobspec)


def _submit(jobid: int, t: float = 1.0) -> JobEvent:
    return JobEvent(jobid, "submit", t, {"jobspec": build_jobspec(["true"]), "userid": 1000, "urgency": 16})


def test_journal_survives_reopen_and_replays(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    journal.append(_submit(1), JobEvent(1, "depend", 1.1), JobEvent(1, "priority", 1.2, {"priority": 16}))
    journal.append(_submit(2), JobEvent(2, "depend", 2.1), JobEvent(2, "priority", 2.2, {"priority": 16}))
    journal.append(JobEvent(1, "alloc", 3.0, {"ranks": [0, 1], "cores": {"0": [0], "1": [0]}}))
    journal.append(JobEvent(1, "finish", 4.0, {"status": 256}), JobEvent(1, "release", 4.1))
    journal.append(JobEvent(1, "clean", 4.2))
    journal.append(JobEvent(2, "exception", 5.0, {"type": "cancel", "severity": 0, "note": "by user"}))
    journal.close()
    jobs = replay(Journal(path).events())
    assert jobs[1].state == JobState.INACTIVE and jobs[1].result == JobResult.FAILED and jobs[1].returncode == 1
    assert jobs[1].ranks == [0, 1] and jobs[1].t_run == 3.0
    assert jobs[2].state == JobState.CLEANUP and jobs[2].result == JobResult.CANCELED


def test_a_torn_last_line_is_dropped_but_a_corrupt_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    journal.append(_submit(1))
    journal.close()
    with open(path, "a") as handle:
        handle.write('{"id": 2, "name": "sub')  # crash mid-write: never acknowledged
    assert [e.jobid for e in Journal(path).events()] == [1]
    path.write_text('{"id": 1}\n' + _submit(2).to_json() + "\n")
    with pytest.raises(JournalError, match=r"journal.jsonl:1"):
        list(Journal(path).events())


def test_requeue_returns_a_running_job_to_the_queue(tmp_path: Path) -> None:
    events = [
        _submit(7),
        JobEvent(7, "depend", 1),
        JobEvent(7, "priority", 1),
        JobEvent(7, "alloc", 2, {"ranks": [1]}),
        JobEvent(7, "requeue", 3, {"note": "rank 1 lost"}),
    ]
    job = replay(events)[7]
    assert job.state == JobState.SCHED and job.ranks == [] and job.requeues == 1


def test_the_first_fatal_exception_decides_the_result_as_in_flux_core() -> None:
    """A job canceled, then failed by its lost rank before the tasks were gone, stays CANCELED (job-list keeps
    the first exception of the lowest severity); a severity-1 exception before either decides nothing."""
    events = [
        _submit(8),
        JobEvent(8, "depend", 1),
        JobEvent(8, "priority", 1),
        JobEvent(8, "alloc", 2, {"ranks": [1]}),
        JobEvent(8, "exception", 2.5, {"type": "test", "severity": 1, "note": "a warning"}),
        JobEvent(8, "exception", 3, {"type": "cancel", "severity": 0, "note": ""}),
        JobEvent(8, "exception", 3.1, {"type": "node-failure", "severity": 0, "note": "lost contact with rank 1"}),
        JobEvent(8, "finish", 4, {"status": 9}),
    ]
    job = replay(events)[8]
    assert job.result == JobResult.CANCELED
    assert job.exception is not None and job.exception["type"] == "cancel"


def test_compaction_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    journal.append(_submit(1), _submit(2))
    journal.rewrite([_submit(2)])
    journal.append(JobEvent(2, "depend", 3))
    journal.close()
    assert [(e.jobid, e.name) for e in Journal(path).events()] == [(2, "submit"), (2, "depend")]
