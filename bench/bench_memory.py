"""Resident memory, ours beside the real thing, measured in one run on this machine (issue 27's memory targets).

    .venv/bin/python bench/bench_memory.py

- idle broker: our built-in broker (`flux start --test-size=1`, the forked broker process) beside real flux-core's
  `flux-broker` (/var/cache/miniclusters/flux-core-*), each idle with no job, a few seconds after start;
- REST server: ours (builtin flavour, started by the lead) beside flux-restful 1.1.0 (the reference, a dev
  dependency) on real flux-core, each after a login and one listing;
- the lead's memory per queued job (issue 41): QUEUED_JOBS jobs (`flux submit --cc=1-20000 true`, this
  environment in each jobspec) queued on a stopped queue, the broker's RSS before and after, in KiB per job;
  flux-core's `flux-broker` beside it, the same jobs submitted by its own `flux submit`.

Beside them, the floors of a Python broker on pyzmq, measured in the same run (issue 45): python_rss_mb, an
idle interpreter started as the `flux` script starts one (this virtualenv's python by `#!`, its site step
included), and python_zmq_rss_mb, the same having imported zmq and made a context (its I/O thread running), which
is where any broker built on pyzmq starts. Issue 45's target: broker_rss_mb <= flux_broker_rss_mb.

Ours is measured twice: in this checkout's virtualenv, and inside the broker image (`make images`; what a pod
runs: the PyInstaller bundle on Debian's Python, started by podman with this script as its probe, `--probe`).

Prints a table (MiB; ratio ours / theirs) and one JSON line with the keys broker_rss_mb, flux_broker_rss_mb,
rest_rss_mb, reference_rest_rss_mb, image_broker_rss_mb and image_rest_rss_mb (null without podman or the
image), lead_rss_per_queued_job_kb and flux_lead_rss_per_queued_job_kb, and the targets: broker <= 20 MB, REST
server <= 45 MB.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from broker.rest import testing

SETTLE_SECONDS = 3.0
QUEUED_JOBS = 20_000
BROKER_TARGET_MB = 20.0
REST_TARGET_MB = 45.0


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def session_processes(sid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every process in a session."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:
                found.append((int(pid), Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()))
    return found


@contextlib.contextmanager
def started(command: list[str], cwd: Path) -> Iterator[subprocess.Popen[bytes]]:
    log = open(cwd / "instance.log", "wb")  # noqa: SIM115 - kept for the instance's lifetime
    process = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield process
    finally:
        testing.kill_group(process)
        log.close()


def our_broker(tmp: Path) -> float:
    """RSS of the built-in broker process (the forked one; its parent only supervises) when idle."""
    command = [testing.FLUX, "start", "--test-size=1", "-o", f"-Sstatedir={tmp / 'state'}", "sleep", "3600"]
    with started(command, tmp) as process:
        time.sleep(SETTLE_SECONDS)
        brokers = [pid for pid, line in session_processes(process.pid) if pid != process.pid and "flux" in line]
        if not brokers:
            raise SystemExit(f"our broker did not start:\n{(tmp / 'instance.log').read_text()[-2000:]}")
        return max(testing.rss_mb(pid) for pid in brokers)


def idle_interpreter(tmp: Path, body: str) -> float:
    """RSS of this virtualenv's python started as the `flux` script is (`#!`), idle after running `body`."""
    script = tmp / "idle"
    script.write_text(f"#!{sys.executable}\n{body}\nimport time\ntime.sleep(3600)\n")
    script.chmod(0o755)
    with started([str(script)], tmp) as process:
        time.sleep(1.0)
        return testing.rss_mb(process.pid)


def python_floor(tmp: Path) -> float:
    return idle_interpreter(tmp, "")


def python_zmq_floor(tmp: Path) -> float:
    return idle_interpreter(tmp, "import zmq\ncontext = zmq.Context()")


def flux_core_broker(tmp: Path) -> float | None:
    from miniclusters.backends.local.flux_view import FluxCoreNotFound, find_flux_core

    try:
        core = find_flux_core()
    except FluxCoreNotFound as exc:
        progress(f"real flux-core not found ({exc}): its column stays empty")
        return None
    with started([str(core.flux), "start", "--test-size=1", "sleep", "3600"], tmp) as process:
        time.sleep(SETTLE_SECONDS)
        brokers = [pid for pid, line in session_processes(process.pid) if "flux-broker" in line]
        if not brokers:
            raise SystemExit(f"flux-core's broker did not start:\n{(tmp / 'instance.log').read_text()[-2000:]}")
        return max(testing.rss_mb(pid) for pid in brokers)


def per_queued_job(flux: str, broker_of: Callable[[str], bool], tmp: Path) -> float:
    """KiB of the lead broker's RSS per job queued (the queue stopped, so that every job stays queued)."""
    uri_file = tmp / "uri"
    command = [flux, "start", "--test-size=1", "sh", "-c", f'echo "$FLUX_URI" > {uri_file}; sleep 3600']
    if flux == testing.FLUX:
        command[3:3] = ["-o", f"-Sstatedir={tmp / 'state'}"]
    with started(command, tmp) as process:
        deadline = time.monotonic() + 60
        while not uri_file.exists() or not uri_file.read_text().strip():
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{flux} start failed:\n{(tmp / 'instance.log').read_text()[-2000:]}")
            time.sleep(0.1)
        env = {**os.environ, "FLUX_URI": uri_file.read_text().strip()}
        subprocess.run([flux, "queue", "stop"], env=env, check=True, capture_output=True)
        time.sleep(SETTLE_SECONDS)
        brokers = [pid for pid, line in session_processes(process.pid) if pid != process.pid and broker_of(line)]
        if len(brokers) != 1:
            raise SystemExit(f"expected one broker process under {flux} start, found {brokers}")
        before = testing.rss_mb(brokers[0])
        submit = [flux, "submit", f"--cc=1-{QUEUED_JOBS}", "--quiet", "true"]
        subprocess.run(submit, env=env, check=True, capture_output=True, timeout=1800)
        time.sleep(SETTLE_SECONDS)
        return (testing.rss_mb(brokers[0]) - before) * 1024 / QUEUED_JOBS


def our_lead_per_job(tmp: Path) -> float:
    progress(f"queuing {QUEUED_JOBS} jobs on our broker ...")
    return per_queued_job(testing.FLUX, lambda line: f"{testing.FLUX} start" in line, tmp)


def flux_core_lead_per_job(tmp: Path) -> float | None:
    from miniclusters.backends.local.flux_view import FluxCoreNotFound, find_flux_core

    try:
        core = find_flux_core()
    except FluxCoreNotFound as exc:
        progress(f"real flux-core not found ({exc}): its per-job column stays empty")
        return None
    progress(f"queuing {QUEUED_JOBS} jobs on flux-core (its own flux submit: a few minutes) ...")
    return per_queued_job(str(core.flux), lambda line: "flux-broker" in line, tmp)


def warm(url: str) -> float:
    """A login and one listing (what a first client does), then the server's RSS."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_rest import Connection, login

    conn = Connection(url, login(url))
    conn.timed("GET", "/v1/jobs")
    conn.close()
    time.sleep(1.0)
    pid = testing.listening_pid(int(url.rsplit(":", 1)[1]))
    return testing.rss_mb(pid) if pid else 0.0


def our_rest(tmp: Path) -> float:
    servers = testing.start_server(tmp, size=1)
    server = next(servers)
    try:
        return warm(server.url)
    finally:
        for _ in servers:
            pass


def reference_rest(tmp: Path) -> float | None:
    from miniclusters.backends.local.flux_view import FluxCoreNotFound, find_flux_core

    try:
        import flux_restful  # noqa: F401 - only to know it is installed
    except ImportError:
        progress("flux-restful is not installed (pip install -e .[dev]): the reference column stays empty")
        return None
    try:
        core = find_flux_core()
    except FluxCoreNotFound as exc:
        progress(f"real flux-core not found ({exc}): the reference column stays empty")
        return None
    if core.python_path is None:
        return None
    with testing.real_flux(core.flux, core.python_path, tmp, size=1) as env, testing.reference_server(env, tmp) as url:
        return warm(url)


def in_image() -> dict[str, float | None]:
    """Our broker and REST server measured inside the broker image: this script run there with `--probe`."""
    import shutil

    from miniclusters.render import RenderOptions

    image = RenderOptions().broker_image
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(root / "images" / "containers.conf"))}
    empty: dict[str, float | None] = {"image_broker_rss_mb": None, "image_rest_rss_mb": None}
    if shutil.which("podman") is None or subprocess.run(["podman", "image", "exists", image], env=env).returncode:
        progress(f"podman or {image} missing (make images): the image rows stay empty")
        return empty
    probe = ["podman", "run", "--rm", "-v", f"{root / 'bench'}:/bench:ro", "--entrypoint", "python3", image]
    done = subprocess.run([*probe, "/bench/bench_memory.py", "--probe"], env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise SystemExit(f"the probe in {image} failed:\n{done.stderr[-2000:]}")
    measured = json.loads(lines[-1])
    return {"image_broker_rss_mb": measured["broker_rss_mb"], "image_rest_rss_mb": measured["rest_rss_mb"]}


def probe() -> None:
    """Inside the image: ours alone, as one JSON line."""
    figures = {}
    for key, measure in (("broker_rss_mb", our_broker), ("rest_rss_mb", our_rest)):
        with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
            figures[key] = round(measure(Path(tmp)), 1)
    print(json.dumps(figures))


def ratio(ours: float | None, theirs: float | None) -> str:
    return f"{ours / theirs:.2f}x" if ours and theirs else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--record", action="store_true", help="write the JSON line into bench/results.toml")
    parser.add_argument("--probe", action="store_true", help="(inside the image) measure ours alone")
    args = parser.parse_args()
    if args.probe:
        probe()
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from fresh_bytecode import ensure_bytecode

    ensure_bytecode()  # what an installed broker starts from: see bench/fresh_bytecode.py
    figures: dict[str, Any] = {}
    for key, measure in (
        ("broker_rss_mb", our_broker),
        ("flux_broker_rss_mb", flux_core_broker),
        ("python_rss_mb", python_floor),
        ("python_zmq_rss_mb", python_zmq_floor),
        ("rest_rss_mb", our_rest),
        ("reference_rest_rss_mb", reference_rest),
        ("lead_rss_per_queued_job_kb", our_lead_per_job),
        ("flux_lead_rss_per_queued_job_kb", flux_core_lead_per_job),
    ):
        progress(f"measuring {key} ...")
        with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
            value = measure(Path(tmp))
        figures[key] = round(value, 1) if value is not None else None
    progress("measuring ours inside the broker image ...")
    figures.update(in_image())
    text = {k: "-" if v is None else f"{v:g}" for k, v in figures.items()}
    print(f"resident memory (MiB), idle; {os.cpu_count()} CPUs")
    print(f"{'':<16}{'ours':>10}{'theirs':>10}{'ours/theirs':>14}{'target':>10}")
    print(
        f"{'broker':<16}{text['broker_rss_mb']:>10}{text['flux_broker_rss_mb']:>10}"
        f"{ratio(figures['broker_rss_mb'], figures['flux_broker_rss_mb']):>14}{BROKER_TARGET_MB:>10g}"
    )
    print(
        f"{'REST server':<16}{text['rest_rss_mb']:>10}{text['reference_rest_rss_mb']:>10}"
        f"{ratio(figures['rest_rss_mb'], figures['reference_rest_rss_mb']):>14}{REST_TARGET_MB:>10g}"
    )
    for name, key, theirs, target in (
        ("broker, image", "image_broker_rss_mb", "flux_broker_rss_mb", BROKER_TARGET_MB),
        ("REST, image", "image_rest_rss_mb", "reference_rest_rss_mb", REST_TARGET_MB),
    ):
        print(f"{name:<16}{text[key]:>10}{text[theirs]:>10}{ratio(figures[key], figures[theirs]):>14}{target:>10g}")
    per_job = ratio(figures["lead_rss_per_queued_job_kb"], figures["flux_lead_rss_per_queued_job_kb"])
    print(
        f"{'lead, KiB/job':<16}{text['lead_rss_per_queued_job_kb']:>10}{text['flux_lead_rss_per_queued_job_kb']:>10}"
        f"{per_job:>14}{'-':>10}   ({QUEUED_JOBS} jobs queued, queue stopped)"
    )
    targets = (("broker", "broker_rss_mb", BROKER_TARGET_MB), ("REST server", "rest_rss_mb", REST_TARGET_MB))
    for name, key, target in targets:
        value = figures[key]
        print(f"issue 27: {name} {value:g} MiB: {'met' if value <= target else 'NOT met'} (<= {target:g})")
    print(
        f"floors: python as the flux script starts it {text['python_rss_mb']} MiB, with zmq imported and a "
        f"context {text['python_zmq_rss_mb']} MiB"
    )
    ours, theirs = figures["broker_rss_mb"], figures["flux_broker_rss_mb"]
    if theirs is not None:
        print(
            f"issue 45: broker {ours:g} MiB <= flux-core's {theirs:g} MiB: {'met' if ours <= theirs else 'NOT met'}"
            f" ({ours - figures['python_zmq_rss_mb']:.1f} MiB above python with zmq)"
        )
    print(json.dumps(figures))
    if args.record:
        from docsgen.benchmarks import record_result

        record_result("memory", {"bench": "memory", **figures})


if __name__ == "__main__":
    main()
