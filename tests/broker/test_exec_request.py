"""The typed hand-off from the job manager to job-exec (broker/modules/exec_request.py)."""

from __future__ import annotations

import pwd
from dataclasses import FrozenInstanceError, replace
from typing import Any

import pytest

from broker.modules.exec_launch import session_parent as _session_parent
from broker.modules.exec_request import ExecRequest, ExecRequestError
from broker.modules.mpi import mpirun_command, orted_command, orted_session_parent

REQUEST = ExecRequest(
    jobid=42,
    gen=1,
    tasks=(2, 3),
    command=("hostname",),
    userid=1000,
    launch="mpi",
    size=4,
    ranks=(0, 1),
    hosts=(("demo-0", 2), ("demo-1", 2)),
    cores={0: (0, 1), 1: (0, 1)},
    env={"PATH": "/bin"},
    cwd="/work",
    batch_script="#!/bin/sh\nhostname\n",
    level=1,
    mpirun_args=("--bind-to", "none"),
    shell_options={"mpi": "openmpi"},
)


def test_the_wire_form_reads_back_as_the_same_request() -> None:
    payload = REQUEST.to_payload()
    assert payload["id"] == 42 and payload["tasks"] == [2, 3] and payload["spec"]["cores"] == {"0": [0, 1], "1": [0, 1]}
    assert payload["spec"]["nnodes"] == 2 and payload["spec"]["batch"] == {"script": "#!/bin/sh\nhostname\n"}
    assert ExecRequest.from_payload(payload) == REQUEST
    with pytest.raises(FrozenInstanceError):
        REQUEST.size = 8  # type: ignore[misc]


def test_the_exec_side_reads_attributes(tmp_path: Any) -> None:
    command = mpirun_command(REQUEST, str(tmp_path), 0)
    assert command[:3] == ["mpirun", "-np", "4"] and command[-3:] == ["--bind-to", "none", "hostname"]
    assert (tmp_path / "hostfile").read_text() == "demo-0 slots=2\ndemo-1 slots=2\n"


def test_an_orted_gets_a_session_base_of_its_own() -> None:
    sent = 'orted -mca ess "env" -mca orte_tmpdir_base "/tmp/ompi-mpirun" -mca pmix "^s1,s2"'
    assert orted_command(sent, "/tmp/ompi-orted 1") == (
        'orted -mca ess "env" -mca orte_tmpdir_base \'/tmp/ompi-orted 1\' -mca pmix "^s1,s2"'
    )
    assert orted_command("orted -mca ess env", "/tmp/x") == "orted -mca ess env"  # nothing to replace
    # the orted's base goes beside mpirun's: where the job asked for its sessions
    assert orted_session_parent(sent) == "/tmp"
    assert (
        orted_session_parent("orted -mca orte_tmpdir_base '/scratch/my jobs/ompi-ab12/' -mca x y") == "/scratch/my jobs"
    )
    assert orted_session_parent("orted -mca ess env") is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda p: p.pop("id"), "id: expected int"),
        (lambda p: p.update(tasks=["0"]), "tasks: expected a list of integers"),
        (lambda p: p["spec"].update(launch="ssh"), "spec.launch: 'ssh' is not one of tasks, mpi, broker"),
        (lambda p: p["spec"].update(command=[]), "spec.command: must not be empty"),
        (lambda p: p["spec"].update(hosts=[["demo-0"]]), "spec.hosts: ['demo-0'] is not [hostname, task count]"),
        (lambda p: p["spec"].update(cores={"zero": [0]}), "spec.cores: 'zero'"),
        (lambda p: p["spec"].update(env={"A": 1}), "spec.env: must map names to strings"),
        (lambda p: p["spec"].update(userid="root"), "spec.userid: expected int"),
    ],
)
def test_a_bad_payload_names_the_field(change: Any, field: str) -> None:
    payload = replace(REQUEST).to_payload()
    change(payload)
    with pytest.raises(ExecRequestError, match="^" + field.replace("[", r"\[").replace("]", r"\]")):
        ExecRequest.from_payload(payload)


def test_a_session_base_of_the_job_s_choosing_is_used_only_for_the_broker_s_own_user(tmp_path: Any) -> None:
    """The broker (root, in a multi-user pod) makes and chowns the session bases: for a job of another user never
    inside a directory of the job's choosing (a symlink swapped in there would turn root's chown on anything),
    and the job is told its setting was not used."""
    chosen = str(tmp_path / "scratch")
    env = {"OMPI_MCA_orte_tmpdir_base": chosen}
    assert _session_parent(env, None) == (chosen, None)  # the broker's own user: made if missing, as Open MPI would
    assert _session_parent({}, None) == (None, None)
    assert _session_parent({}, pwd.getpwnam("nobody")) == (None, None)
    parent, note = _session_parent(env, pwd.getpwnam("nobody"))
    assert parent is None and note is not None and f"OMPI_MCA_orte_tmpdir_base={chosen} not used" in note
