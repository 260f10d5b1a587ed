"""The broker bundle's front end (miniclusters/frozen.py): one executable is flux, minicluster and python3.

The python3 name must understand the command lines our code starts helpers with (`sys.executable -m MODULE`,
`-I -S SCRIPT`, `-c CODE`), exactly as CPython splits them; these run here, unfrozen, through the same code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from miniclusters.frozen import Invocation, UsageError, add_extras, command_for, parse_interpreter_args

FRONT_END = "import sys; from miniclusters.frozen import run_interpreter; run_interpreter(sys.argv[1:])"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["-m", "broker.subinstance", "/run/x"], Invocation("module", "broker.subinstance", ("/run/x",))),
        (["-mbursting.service", "--cluster", "a"], Invocation("module", "bursting.service", ("--cluster", "a"))),
        (["-I", "-S", "/s/supervisor.py", "-v"], Invocation("script", "/s/supervisor.py", ("-v",), frozenset("IS"))),
        (["-IS", "-c", "print(1)", "x"], Invocation("code", "print(1)", ("x",), frozenset("IS"))),
        (["-W", "ignore", "-X", "dev", "-u", "-m", "m"], Invocation("module", "m", (), frozenset("u"))),
        (["-Wignore", "script.py"], Invocation("script", "script.py", ())),
        (["--", "-odd-name.py", "a"], Invocation("script", "-odd-name.py", ("a",))),
        (["-m", "m", "-c", "not-an-option"], Invocation("module", "m", ("-c", "not-an-option"))),
        (["--version"], Invocation("version")),
        (["-V"], Invocation("version")),
    ],
)
def test_command_lines_split_as_cpython_splits_them(argv: list[str], expected: Invocation) -> None:
    assert parse_interpreter_args(argv) == expected


@pytest.mark.parametrize(("argv", "message"), [(["-m"], "-m option"), (["-Z"], "Unknown option: -Z"), ([], "SCRIPT")])
def test_unusable_command_lines_say_what_is_missing(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_interpreter_args(argv)


def test_the_name_run_as_picks_the_command() -> None:
    assert command_for("/mnt/miniclusters/bin/flux") == "flux"
    assert command_for("minicluster") == "minicluster"
    assert command_for("/opt/miniclusters/env/bin/python3") == "python3"
    assert command_for("/opt/miniclusters/env/miniclusters") == "python3"


def _front_end(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", FRONT_END, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_a_module_runs_as_main_with_its_arguments() -> None:
    result = _front_end("-m", "broker.rest.users_admin", "--help")
    assert result.returncode == 0, result.stderr
    assert "users_admin" in result.stdout and "add" in result.stdout


def test_a_script_runs_with_its_directory_on_the_path_and_its_exit_code(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("VALUE = 'from-beside'\n")
    script = tmp_path / "script.py"
    script.write_text("import sys, helper\nprint(helper.VALUE, sys.argv[1:])\nsys.exit(3)\n")
    result = _front_end("-I", "-S", str(script), "a", "b")
    assert result.returncode == 3 and result.stdout.strip() == "from-beside ['a', 'b']", result.stderr


def test_code_sees_its_arguments() -> None:
    result = _front_end("-c", "import sys; print(sys.argv)", "x")
    assert result.returncode == 0 and result.stdout.strip() == "['-c', 'x']", result.stderr


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [("flux", ["version"], "miniclusters built-in"), ("minicluster", ["--version"], "minicluster, version")],
)
def test_the_bundle_entry_runs_the_console_scripts_by_name(name: str, args: list[str], expected: str) -> None:
    """What images/broker/bundle.py runs, unfrozen: argv[0]'s name picks pyproject's flux or minicluster."""
    code = f"import sys; sys.argv = [{f'/x/bin/{name}'!r}, *sys.argv[1:]]; from miniclusters.frozen import main; main()"
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout


def test_matplotlib_gets_a_private_config_dir_only_when_first_imported(tmp_path: Path) -> None:
    """The bundle's lazy stand-in for PyInstaller's MPLCONFIGDIR hook: nothing at start; at matplotlib's first
    import a fresh private directory (no warning about an unwritable HOME), removed at exit."""
    code = (
        "import os, sys\n"
        "from miniclusters.frozen import MatplotlibConfigDir\n"
        "sys.meta_path.insert(0, MatplotlibConfigDir())\n"
        "import json\n"
        "print('before', os.environ.get('MPLCONFIGDIR', 'unset'))\n"
        "import matplotlib\n"
        "directory = os.environ['MPLCONFIGDIR']\n"
        "print('after', directory, oct(os.stat(directory).st_mode & 0o777))\n"
        "print('finders', sum(type(f).__name__ == 'MatplotlibConfigDir' for f in sys.meta_path))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "TMPDIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    before, after, finders = result.stdout.splitlines()
    assert before == "before unset"
    _, directory, mode = after.split()
    assert directory.startswith(str(tmp_path / "matplotlib-")) and mode == "0o700"
    assert finders == "finders 0"
    assert "temporary cache directory" not in result.stderr
    assert not Path(directory).exists(), "the directory outlived the process"


def test_the_extras_go_last_on_the_path_only_where_they_were_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pod's core copy has no env/extras (nothing added); the image's or a --with-extras copy has, appended
    after the bundle's own modules so that the frozen core wins where both hold a module."""
    monkeypatch.setattr(sys, "path", ["/bundle/_internal"])
    add_extras(str(tmp_path))
    assert sys.path == ["/bundle/_internal"]
    (tmp_path / "extras").mkdir()
    add_extras(str(tmp_path))
    assert sys.path == ["/bundle/_internal", str(tmp_path / "extras")]
