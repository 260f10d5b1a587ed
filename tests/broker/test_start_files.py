"""What a broker and `flux start --test-size` make at start without tempfile, shutil and tomli_w (issue 45, an
idle broker's memory): the run directory as tempfile.mkdtemp makes it (broker/tempdir.py), the test instance's TOML
as tomllib reads it back (broker/bootstrap_toml.py), and shutil.which's answer for the initial program's PATH."""

from __future__ import annotations

import os
import shutil
import stat
import tomllib
from pathlib import Path

import pytest

from broker.bootstrap_toml import bootstrap_toml, toml_string
from broker.lifecycle import on_path
from broker.tempdir import make_rundir, temp_dir


def test_a_run_directory_is_new_private_and_where_tempfile_would_put_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    made = {make_rundir() for _ in range(20)}
    assert len(made) == 20
    for path in made:
        assert Path(path).parent == tmp_path and Path(path).name.startswith("flux-")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    monkeypatch.setenv("TMPDIR", str(tmp_path / "gone"))  # as tempfile: a TMPDIR that is no directory is passed over
    for name in ("TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    assert temp_dir() == "/tmp"


@pytest.mark.parametrize(
    "text", ["plain", 'quote " inside', "back\\slash", "tab\tnew\nline\r", "\x00\x1f\x7f", "é ü 名前", ""]
)
def test_a_toml_string_reads_back_as_the_text(text: str) -> None:
    assert tomllib.loads(f"value = {toml_string(text)}\n") == {"value": text}


def test_the_bootstrap_toml_reads_back_as_the_hosts_and_certificate_given() -> None:
    hosts = [
        {"host": "vm-0", "bind": "tcp://127.0.0.1:5000", "connect": "tcp://127.0.0.1:5000"},
        {"host": 'odd"name\\', "bind": "tcp://127.0.0.2:5001", "connect": "tcp://127.0.0.2:5001"},
    ]
    assert tomllib.loads(bootstrap_toml(hosts, "/run/flux/curve.cert")) == {
        "bootstrap": {"curve_cert": "/run/flux/curve.cert", "hosts": hosts}
    }
    assert tomllib.loads(bootstrap_toml(hosts[:1], None)) == {"bootstrap": {"hosts": hosts[:1]}}


def test_on_path_answers_as_shutil_which(tmp_path: Path) -> None:
    program = tmp_path / "bin" / "flux"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "flux").write_text("not executable")
    (tmp_path / "dir" / "flux").mkdir(parents=True)
    for path in (
        f"{tmp_path / 'plain'}:{tmp_path / 'dir'}",
        f"{tmp_path / 'plain'}:{program.parent}",
        "",
        None,
    ):
        program.chmod(0o755)
        assert on_path("flux", path) == (shutil.which("flux", path=path) is not None), path
        program.chmod(0o644)
        assert on_path("flux", path) == (shutil.which("flux", path=path) is not None), path
