"""`flux run` and `flux submit` end with os._exit once their output is flushed (issue 45: the interpreter's
teardown cost `flux run true` 2 ms of CPU), but only when the usual exit has nothing else to do."""

from __future__ import annotations

import subprocess
import sys


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_quick_exit_flushes_what_was_written_and_keeps_the_code() -> None:
    done = run(
        "import sys; from broker.cli.flux import _quick_exit; sys.stdout.write('out'); "
        "sys.stderr.write('err'); _quick_exit(3); print('not reached')"
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "out", "err")


def test_quick_exit_of_none_is_success() -> None:
    assert run("from broker.cli.flux import _quick_exit; _quick_exit(None); raise SystemExit(5)").returncode == 0


def test_an_atexit_handler_gets_the_usual_exit() -> None:
    done = run(
        "import atexit; atexit.register(print, 'handler ran'); from broker.cli.flux import _quick_exit; "
        "_quick_exit(0); print('returned')"
    )
    assert done.returncode == 0
    assert done.stdout.split() == ["returned", "handler", "ran"]


def test_a_running_thread_gets_the_usual_exit() -> None:
    done = run(
        "import threading, time; t = threading.Thread(target=time.sleep, args=(0.2,)); t.start(); "
        "from broker.cli.flux import _quick_exit; _quick_exit(0); print('returned')"
    )
    assert (done.returncode, done.stdout.strip()) == (0, "returned")


def test_a_message_code_gets_the_usual_exit() -> None:
    done = run("from broker.cli.flux import _quick_exit; _quick_exit('flux-run: gone'); print('returned')")
    assert done.stdout.strip() == "returned"


def test_other_commands_exit_the_usual_way() -> None:
    """`flux jobs` and the others may start threads or register handlers: only run and submit take the short way."""
    done = run(
        "import atexit, sys; atexit.register(print, 'handler ran'); from broker.cli import flux; "
        "sys.argv = ['flux', 'version']; flux.main()"
    )
    assert "handler ran" in done.stdout
