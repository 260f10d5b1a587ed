"""The built-in broker and real flux-core side by side, in one run, with the ratios (prints figures + a JSON line).

Both flavours get the same commands through their own `flux`:
  bootstrap    `flux start --test-size=N true`: start to exit, and start until the initial program runs (online)
  throughput   `flux submit --cc=1-M --quiet --wait true` in a 4-broker instance: jobs per second, end to end
  latency      `flux run true`, median of R runs, CLI start-up included
  REST         our REST server (`python -m broker.rest.server --flavour builtin|flux`) on a 1-broker instance, auth
               on: GET /v1/jobs/{id} requests/s (4 keep-alive clients) and POST /v1/jobs/submit latency
Ratios are built-in / flux-core: above 1 means the built-in broker takes longer (or, for rates, does more).
flux-core comes from $FLUX_CORE_PREFIX, PATH or `make flux-core`.

    .venv/bin/python bench/bench_flavours.py [--size 8] [--jobs 500] [--runs 15] [--requests 2000] [--submits 100]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rest import Connection, in_threads

from broker.rest.client import RestClient
from broker.rest.testing import SECRET_KEY, SIGNING_KEY, SUPERUSER, free_port
from docsgen.benchmarks import record_result
from miniclusters.backends.local.flux_view import find_flux_core

IDLE = 'echo "$FLUX_URI" > "$0"; exec sleep 3600'


@contextlib.contextmanager
def instance(flux: Path, size: int, tmp: Path) -> Iterator[dict[str, str]]:
    """A test instance of `size` brokers; yields an environment whose FLUX_URI and PATH reach it."""
    marker = tmp / f"uri-{flux.parent.parent.name}-{size}"
    marker.unlink(missing_ok=True)
    env = dict(os.environ, PATH=f"{flux.parent}{os.pathsep}{os.environ['PATH']}")
    env.pop("FLUX_URI", None)
    proc = subprocess.Popen(
        [str(flux), "start", f"--test-size={size}", "sh", "-c", IDLE, str(marker)],
        env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (marker.exists() and marker.read_text().strip()):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"{flux} start --test-size={size} did not come up")
            time.sleep(0.02)
        yield dict(env, FLUX_URI=marker.read_text().strip())
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def bootstrap(flux: Path, size: int, tmp: Path, repeats: int = 3) -> dict[str, float]:
    """Median seconds: to online (the initial program runs) and to exit (`true` done, instance shut down)."""
    online, total = [], []
    for i in range(repeats):
        marker = tmp / f"online-{i}"
        env = dict(os.environ, PATH=f"{flux.parent}{os.pathsep}{os.environ['PATH']}")
        env.pop("FLUX_URI", None)
        started = time.perf_counter()
        proc = subprocess.Popen(
            [str(flux), "start", f"--test-size={size}", "touch", str(marker)],
            env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        while not marker.exists() and proc.poll() is None:
            time.sleep(0.005)
        online.append(time.perf_counter() - started)
        if proc.wait(timeout=300) != 0:
            raise SystemExit(f"{flux} start --test-size={size} true failed")
        total.append(time.perf_counter() - started)
    return {"online_s": statistics.median(online), "total_s": statistics.median(total)}


def throughput(env: dict[str, str], jobs: int) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        ["flux", "submit", f"--cc=1-{jobs}", "--quiet", "--wait", "true"], env=env, capture_output=True, text=True
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"throughput run failed: {done.stderr[-500:]}")
    return jobs / elapsed


def latency_ms(env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs + 2):
        started = time.perf_counter()
        subprocess.run(["flux", "run", "true"], env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times[2:]) * 1000  # the first runs warm the page cache


def rest(flavour: str, env: dict[str, str], tmp: Path, python_path: Path | None, args: argparse.Namespace) -> dict:
    port = free_port()
    server_env = dict(
        env,
        FLUX_USER=SUPERUSER[0],
        FLUX_TOKEN=SUPERUSER[1],
        FLUX_SECRET_KEY=SECRET_KEY,
        FLUX_TOKEN_SIGNING_KEY=SIGNING_KEY,
    )
    if python_path is not None:
        server_env["PYTHONPATH"] = str(python_path)
    state = tmp / f"rest-{flavour}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker.rest.server", "--flavour", flavour, "--host", "127.0.0.1",
         "--port", str(port), "--state-dir", str(state)],
        env=server_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"REST server ({flavour}) did not come up")
            time.sleep(0.1)
        client = RestClient(url, user=SUPERUSER[0], token=SUPERUSER[1], secret_key=SECRET_KEY)
        token = client.login()
        jobid = client.submit("true")
        rps = requests_per_second(url, token, jobid, args.requests, 4)
        latencies = sorted(submit_latencies(url, token, args.submits))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return {
        "get_rps": rps,
        "submit_median_ms": statistics.median(latencies),
        "submit_p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
    }


def requests_per_second(url: str, token: str, jobid: int, total: int, clients: int) -> float:
    """GET /v1/jobs/{id} from `clients` keep-alive connections at once, `total` in all."""
    per_client = total // clients

    def work(_index: int) -> None:
        conn = Connection(url, token)
        try:
            for _ in range(per_client):
                conn.timed("GET", f"/v1/jobs/{jobid}")
        finally:
            conn.close()

    return per_client * clients / in_threads(clients, work)


def submit_latencies(url: str, token: str, count: int) -> list[float]:
    """Milliseconds per submit of `true`, one at a time."""
    conn = Connection(url, token)
    try:
        return [conn.timed("POST", "/v1/jobs/submit", {"command": "true"}) for _ in range(count)]
    finally:
        conn.close()


def measure(flux: Path, python_path: Path | None, flavour: str, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix=f"bench-{flavour}-", dir="/tmp") as name:
        tmp = Path(name)
        result = {f"bootstrap_{k}": v for k, v in bootstrap(flux, args.size, tmp).items()}
        with instance(flux, 4, tmp) as env:
            result["jobs_per_s"] = throughput(env, args.jobs)
            result["run_true_ms"] = latency_ms(env, args.runs)
        with instance(flux, 1, tmp) as env:
            result |= {f"rest_{k}": v for k, v in rest(flavour, env, tmp, python_path, args).items()}
    return result


ROWS = [
    ("bootstrap_online_s", "bootstrap: {size} brokers online (s)"),
    ("bootstrap_total_s", "bootstrap: start..exit of `true` (s)"),
    ("jobs_per_s", "throughput: {jobs} x true, 4 brokers (jobs/s)"),
    ("run_true_ms", "`flux run true` median (ms)"),
    ("rest_get_rps", "REST GET /v1/jobs/{{id}} (requests/s)"),
    ("rest_submit_median_ms", "REST submit median (ms)"),
    ("rest_submit_p99_ms", "REST submit p99 (ms)"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=8, help="brokers for the bootstrap figure")
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--submits", type=int, default=100)
    parser.add_argument("--record", action="store_true", help="write the JSON line into bench/results.toml")
    args = parser.parse_args()
    core = find_flux_core()
    ours = measure(Path(sys.executable).with_name("flux"), None, "builtin", args)
    real = measure(core.flux, core.python_path, "flux", args)
    load = os.getloadavg()[0]
    print(f"built-in broker vs flux-core ({core.prefix}); {os.cpu_count()} CPUs, load average {load:.1f}")
    print(f"{'measure':<46} {'built-in':>10} {'flux-core':>10} {'ratio':>7}")
    for key, label in ROWS:
        text = label.format(size=args.size, jobs=args.jobs)
        print(f"{text:<46} {ours[key]:>10.3f} {real[key]:>10.3f} {ours[key] / real[key]:>7.2f}")
    ratios = {key: round(ours[key] / real[key], 3) for key, _ in ROWS}
    figures = {"builtin": ours, "flux-core": real, "ratio_builtin_over_flux_core": ratios}
    print(json.dumps(figures))
    if args.record:
        record_result("flavours", figures)


if __name__ == "__main__":
    main()
