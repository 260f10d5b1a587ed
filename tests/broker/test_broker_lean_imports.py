"""What a broker loads at start (issue 27's memory target for an idle broker, bench/bench_memory.py): neither
OpenSSL (hashlib, about 3 MB resident) nor the archive's tarfile, which only a save or a restore needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import json, sys
import broker.broker, broker.cli.flux, broker.testsize
from broker.modules import job_manager, job_exec, scheduler, restful, drains, subinstance
from broker.modules.job_manager import manager, queue_state
print(json.dumps(sorted(sys.modules)))
"""


def test_a_broker_starts_without_openssl_or_tarfile() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout.splitlines()[-1]))
    assert "broker.modules.job_manager.saver" in loaded  # the probe did load the job manager
    assert not loaded & {"hashlib", "_hashlib", "tarfile", "broker.jobs.archive"}, loaded & {"hashlib", "tarfile"}


CLI_PROBE = """
import sys
from broker.cli import flux, jobcli, submit_cmds
print(" ".join(sorted(sys.modules)))
"""
HEAVY = {"json", "re", "enum", "typing", "zmq", "click", "orjson", "contextlib", "dataclasses", "broker.jobs.api"}
LIGHT_BUT_AVOIDABLE = {"collections", "collections.abc", "struct", "math", "common", "common.idset"}
"""Issue 45: collections cost `flux run true` 1.5 ms, struct 0.4, math 0.2; idsets are for --cc and --bcc only."""


def test_flux_run_and_submit_load_none_of_the_heavy_modules() -> None:
    """`flux run true` is mostly interpreter start-up (issue 27: <= 20 ms with it): the modules `flux run` and
    `flux submit` load need none of these, which cost it from 1 to 15 ms each here."""
    result = subprocess.run([sys.executable, "-c", CLI_PROBE], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded = set(result.stdout.split())
    assert {"broker.cli.submit_cmds", "broker.cli.lean", "broker.cli.codec"} <= loaded
    assert not loaded & HEAVY, loaded & HEAVY


def test_flux_run_loads_no_collections_struct_math_or_idsets() -> None:
    """Issue 45 (`flux run true` within 8 ms of the interpreter's start): frame headers and the jobspec's slot
    count need none of these, and `collections` alone cost the command 1.5 ms here."""
    result = subprocess.run([sys.executable, "-c", CLI_PROBE], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded = set(result.stdout.split())
    assert "broker.cli.submit_stream" in loaded
    assert not loaded & LIGHT_BUT_AVOIDABLE, loaded & LIGHT_BUT_AVOIDABLE


IDLE_BROKER_NEVER = {
    "asyncio",  # zmq.utils.monitor imported it (and ssl) for one parser: 3 MB (issue 45)
    "ssl",
    "_ssl",
    "concurrent.futures",
    "zmq.asyncio",
    "zmq.utils.monitor",
    "ast",  # inspect's, deferred (broker/lazy_stdlib.py): a dataclass without a docstring would load them
    "dis",
    "tokenize",
    "decimal",  # quantities are parsed where a request is read, not at start
    "broker.jobs.api",  # the client's job API: the job manager's first REST listing loads it
    # issue 45, third pass: what an idle broker holds no longer (14.3 MB against flux-core's 14.8 here)
    "broker.modules.job_manager.manager",  # the job manager's parts: at the first job-manager request
    "broker.modules.job_manager.table",
    "broker.jobs.store",
    "elasticity.policy.queue",
    "broker.modules.job_exec",  # job exec's launch code: at the first job-exec request
    "broker.modules.exec_launch",
    "tempfile",  # its random, and shutil's zlib, bz2 and lzma (broker/tempdir.py makes the run directory)
    "tomli_w",  # the test instance's TOML: broker/bootstrap_toml.py
}


def _modules_loaded(size: int, tmp_path: Path) -> set[str]:
    """The modules `flux start --test-size=SIZE true` imports in all its processes (as -X importtime lists them)."""
    flux = Path(sys.executable).with_name("flux")
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    command = [str(flux), "start", f"--test-size={size}", "-o", f"-Sstatedir={tmp_path / 'state'}", "true"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    return {line.split("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def test_an_idle_broker_loads_none_of_what_it_never_uses(tmp_path: Path) -> None:
    """The modules a real `flux start --test-size=1` loads (parent and forked broker, as -X importtime lists
    them): issue 45's idle broker memory, held here so that it cannot creep back."""
    loaded = _modules_loaded(1, tmp_path)
    assert {"broker.broker", "broker.modules.job_manager", "zmq"} <= loaded  # the broker did start
    assert not loaded & IDLE_BROKER_NEVER, loaded & IDLE_BROKER_NEVER


def test_many_brokers_forked_from_one_process_share_what_one_broker_loads_on_first_use(tmp_path: Path) -> None:
    """`flux start --test-size=2` imports job exec and the job manager's parts before forking (their pages shared
    by every broker that runs a job), where one broker alone leaves them to the first request."""
    loaded = _modules_loaded(2, tmp_path)
    assert {"broker.modules.job_exec", "broker.modules.job_manager.manager"} <= loaded


STILL_DEFERRED_PROBE = """
import sys
from broker.lazy_stdlib import DEFERRED, DeferredModule, defer
defer()
import broker.broker, broker.cli.start, broker.testsize, broker.lifecycle
from broker.modules import default_modules
default_modules()
print(" ".join(name for name in DEFERRED if type(sys.modules[name]) is not DeferredModule))
"""


def test_what_a_broker_imports_at_start_runs_none_of_the_deferred_modules() -> None:
    """Each module deferred (pyzmq's pickle and random, pathlib's ipaddress, subprocess's locale, ...) is still
    waiting once a broker has imported what it starts with: none of it is read at import time."""
    done = subprocess.run([sys.executable, "-c", STILL_DEFERRED_PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []


def test_what_is_given_to_a_deferred_module_beforehand_is_what_it_holds_once_run() -> None:
    import pickle

    from broker.lazy_stdlib import PRESET

    assert PRESET["pickle"] == {"DEFAULT_PROTOCOL": pickle.DEFAULT_PROTOCOL}
    probe = (
        "from broker.lazy_stdlib import defer; defer(); import zmq, pickle, zmq.sugar.socket as s; "
        "print(pickle.loads(pickle.dumps({'a': 1})), s.DEFAULT_PROTOCOL == pickle.DEFAULT_PROTOCOL)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "{'a': 1} True", done.stderr


DEFERRED_PROBE = """
import sys
from broker.lazy_stdlib import DeferredModule, defer
defer(("inspect", "sys"))
deferred = sys.modules["inspect"]
assert type(deferred) is DeferredModule and "ast" not in sys.modules
import inspect  # the import statement reads __spec__: still deferred
assert inspect is deferred and type(inspect) is DeferredModule and "ast" not in sys.modules
from inspect import signature  # the first attribute runs it, into the same object
assert type(inspect) is not DeferredModule and sys.modules["inspect"] is deferred and "ast" in sys.modules
print(signature(lambda a, b=1: None), inspect.ismodule(inspect))
"""


def test_a_deferred_module_runs_on_first_use_and_stays_the_same_object() -> None:
    done = subprocess.run([sys.executable, "-c", DEFERRED_PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["(a,", "b=1)", "True"]


THREADS_PROBE = """
import threading
from broker.lazy_stdlib import defer
defer()
import inspect
start = threading.Barrier(8)
answers = []
def use():
    start.wait()
    answers.append(str(inspect.signature(use)))
threads = [threading.Thread(target=use) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
try:
    inspect.no_such_thing
except AttributeError:
    print(len(answers), set(answers), "missing")
"""


def test_threads_that_use_a_deferred_module_first_together_all_get_it_whole() -> None:
    done = subprocess.run([sys.executable, "-c", THREADS_PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "8 {'()'} missing"


BROKEN_LOADER_PROBE = """
import sys
from broker.lazy_stdlib import defer
defer()
deferred = sys.modules["inspect"]
class Broken:
    def exec_module(self, module):
        raise ImportError("this importer cannot run a module into a given object")
deferred.__dict__["__spec__"].loader = Broken()
import inspect
print(inspect.signature(lambda a: None), sys.modules["inspect"].ismodule(sys))
"""


def test_a_module_its_importer_cannot_defer_is_imported_the_usual_way_with_one_line() -> None:
    done = subprocess.run([sys.executable, "-c", BROKEN_LOADER_PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["(a)", "True"]
    assert done.stderr.count("\n") == 1 and "deferred import of inspect failed" in done.stderr
