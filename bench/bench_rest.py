"""REST API throughput and latency, auth on, against real servers on real instances, one server at a time.

    .venv/bin/python bench/bench_rest.py               # our built-in flavour
    .venv/bin/python bench/bench_rest.py --reference   # flux-restful 1.1.0 on real flux-core, then our flux
                                                       # flavour on real flux-core, then our built-in flavour

Every server gets the same script: one finished job to read; one job holding every node, so that all the jobs
submitted afterwards wait in the queue (the instance spends no CPU running them and the numbers are the
server's); GETs of the finished job from 1 and 8 clients; submits one at a time; submits from 4 client threads
while one more client (another process) reads the finished job; the queue filled to --jobs; submits one at a
time again; the first detailed listing (capped at 1,000 jobs by every server); the server's resident memory.
Each flux-core server gets a fresh instance (`flux start --test-size=2`, as the parity test), so each sees the
same queue.

Prints progress on stderr, a table with each of our servers' ratio to the reference, and one JSON line per server
(keys: server, get_rps_1, get_rps_8, submit_p50_ms, submit_p95_ms, submit_p50_1000_ms, submit_threads_per_s,
get_p50_idle_ms, get_p50_during_submits_ms, listing_1000_ms, rss_mb; with --scale N also scale_jobs,
submit_p50_scale_ms, listing_scale_ms, listing_scale_again_ms, listing_scale_decode_ms,
listing_scale_count). A listing's time is until its last byte arrived; the client's own decoding of it is
listing_scale_decode_ms, and listing_scale_again_ms the median of LISTING_REPEATS listings after the first.
Issue 30's bar: our flux flavour's 4-thread submit throughput at least the reference's, and in both flavours GET
p50 during submits at most twice its idle value.
Issue 27's REST targets (built-in flavour): GET rate at least 4x the reference's, submit p50 at most 3 ms from an
empty queue to 5,000 jobs (`--scale 5000`), the detailed listing of those jobs within 100 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from broker.rest import testing
from broker.rest.testing import SECRET_KEY, SUPERUSER
from broker.rest.tokens import encode_handshake

SERVERS = ("reference", "flux", "builtin")
SUBMIT_THREADS = 4
LISTING_REPEATS = 5
KEYS = (
    "get_rps_1",
    "get_rps_8",
    "submit_p50_ms",
    "submit_p95_ms",
    "submit_p50_1000_ms",
    "submit_threads_per_s",
    "get_p50_idle_ms",
    "get_p50_during_submits_ms",
    "listing_1000_ms",
    "rss_mb",
    "submit_p50_scale_ms",
    "listing_scale_ms",
    "listing_scale_again_ms",
)
HIGHER_IS_BETTER = {"get_rps_1", "get_rps_8", "submit_threads_per_s"}
STARTED = time.monotonic()


def progress(message: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.1f}s] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Counts:
    gets: int = 300  # GETs from one client: idle p50 and requests/s
    gets_8: int = 800  # GETs from 8 clients together
    submits: int = 100  # submits one at a time
    threaded: int = 400  # submits from 4 client threads, while one more client reads
    jobs: int = 1000  # jobs in the queue before the late submits and the listing
    late: int = 50  # submits one at a time with the queue full
    scale: int = 0  # issue 27: then fill the queue to this many and measure submits and the listing again


class Connection:
    """One keep-alive HTTP/1.1 connection (http.client: the client's own cost stays small beside the server's)."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=120)
        self.headers = {"Authorization": f"Bearer {token}"}

    def call(self, method: str, path: str, params: dict[str, str] | None = None) -> tuple[int, Any]:
        status, body = self.fetch(method, path, params)
        try:
            return status, json.loads(body)
        except ValueError:
            return status, body.decode(errors="replace")

    def fetch(self, method: str, path: str, params: dict[str, str] | None = None) -> tuple[int, bytes]:
        """The status and the body as it came, undecoded."""
        target = f"{path}?{urlencode(params)}" if params else path
        try:
            self.conn.request(method, target, headers=self.headers)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            # the server closed this connection while it sat idle (uvicorn's keep-alive timeout is 5 s): the
            # request never reached it, so sending it again on a new connection is safe
            self.conn.close()
            self.conn.request(method, target, headers=self.headers)
            response = self.conn.getresponse()
        return response.status, response.read()

    def listing(self, name: str, params: dict[str, str]) -> tuple[list[Any], float, float]:
        """A detailed listing, the milliseconds until its last byte arrived (the server's answer) and those the
        client then spent decoding it (json.loads: about 100 ms for 5,000 records, whoever served them)."""
        started = time.perf_counter()
        status, body = self.fetch("GET", "/v1/jobs", params)
        served = time.perf_counter()
        try:
            records = json.loads(body)
        except ValueError:
            records = None
        decoded = time.perf_counter()
        if status != 200 or not isinstance(records, list):
            raise SystemExit(f"{name}: the detailed listing failed: {status} {body[:300]!r}")
        return records, (served - started) * 1000, (decoded - served) * 1000

    def timed(self, method: str, path: str, params: dict[str, str] | None = None) -> float:
        """Milliseconds for one request that must succeed."""
        started = time.perf_counter()
        status, body = self.call(method, path, params)
        elapsed = (time.perf_counter() - started) * 1000
        if status != 200:
            raise SystemExit(f"{method} {path} {params or ''}: {status} {str(body)[:300]}")
        return elapsed

    def close(self) -> None:
        self.conn.close()


def login(url: str) -> str:
    """A bearer token through the shared-secret handshake both servers accept."""
    conn = http.client.HTTPConnection(urlsplit(url).hostname or "", urlsplit(url).port or 80, timeout=60)
    handshake = encode_handshake(SUPERUSER[0], SUPERUSER[1], SECRET_KEY)
    conn.request("POST", "/v1/token", headers={"Authorization": f"Bearer {handshake}"})
    response = conn.getresponse()
    body = json.loads(response.read())
    conn.close()
    if response.status != 200:
        raise SystemExit(f"{url}: login refused: {body}")
    return str(body["access_token"])


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def submit(conn: Connection, **params: str) -> int:
    status, body = conn.call("POST", "/v1/jobs/submit", params)
    if status != 200:
        raise SystemExit(f"submit {params}: {status} {str(body)[:300]}")
    return int(body["id"])


def wait_state(conn: Connection, jobid: int, states: set[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while (state := conn.call("GET", f"/v1/jobs/{jobid}")[1].get("state")) not in states:
        if time.monotonic() > deadline:
            raise SystemExit(f"job {jobid} still {state} after {timeout:.0f}s")
        time.sleep(0.1)


def in_threads(count: int, work: Callable[[int], None]) -> float:
    """Run work(0..count-1) in threads; the wall time in seconds."""
    failures: list[BaseException] = []

    def run(index: int) -> None:
        try:
            work(index)
        except BaseException as exc:  # reported below, with the other threads joined
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"a client thread failed: {failures[0]}")
    return time.perf_counter() - started


def _watch(url: str, token: str, path: str, stop: Any, results: Any) -> None:
    conn = Connection(url, token)
    latencies = []
    while not stop.is_set():
        latencies.append(conn.timed("GET", path))
    conn.close()
    results.put(latencies)


@contextlib.contextmanager
def watching(url: str, token: str, path: str) -> Iterator[list[float]]:
    """GETs of `path`, back to back, from another process while the block runs; their latencies (ms) after.

    Another process, so that what it measures is the server's delay, not this process's submitting threads
    holding the interpreter lock."""
    context = multiprocessing.get_context("fork")
    stop, results = context.Event(), context.Queue()
    reader = context.Process(target=_watch, args=(url, token, path, stop, results))
    latencies: list[float] = []
    reader.start()
    try:
        yield latencies
    finally:
        stop.set()
        latencies.extend(results.get(timeout=120))
        reader.join(timeout=30)


def measure(name: str, url: str, counts: Counts) -> dict[str, Any]:
    """Issue 30's figures for one server (see the module docstring for the script)."""
    token = login(url)
    main = Connection(url, token)
    finished = submit(main, command="true")
    wait_state(main, finished, {"INACTIVE"})
    holder = submit(main, command="sleep 3600", num_nodes="2", num_tasks="2", exclusive="true")
    wait_state(main, holder, {"RUN"})
    path = f"/v1/jobs/{finished}"
    progress(f"{name}: {counts.gets} GETs from 1 client")
    started = time.perf_counter()
    idle = [main.timed("GET", path) for _ in range(counts.gets)]
    rps_1 = counts.gets / (time.perf_counter() - started)

    progress(f"{name}: {counts.gets_8} GETs from 8 clients")

    def reader(_index: int) -> None:
        conn = Connection(url, token)
        for _ in range(counts.gets_8 // 8):
            conn.timed("GET", path)
        conn.close()

    rps_8 = (counts.gets_8 // 8 * 8) / in_threads(8, reader)

    progress(f"{name}: {counts.submits} submits, one at a time")
    one_by_one = [main.timed("POST", "/v1/jobs/submit", {"command": "true"}) for _ in range(counts.submits)]

    progress(f"{name}: {counts.threaded} submits from {SUBMIT_THREADS} threads, one more client reading")

    def submitter(count: int) -> Callable[[int], None]:
        def work(_index: int) -> None:
            conn = Connection(url, token)
            for _ in range(count):
                conn.timed("POST", "/v1/jobs/submit", {"command": "true"})
            conn.close()

        return work

    per_thread = counts.threaded // SUBMIT_THREADS
    with watching(url, token, path) as during:
        threaded_s = in_threads(SUBMIT_THREADS, submitter(per_thread))

    submitted = 2 + counts.submits + per_thread * SUBMIT_THREADS
    fill = max(0, counts.jobs - submitted)
    if fill:
        progress(f"{name}: {fill} more submits to hold {counts.jobs} jobs")
        in_threads(SUBMIT_THREADS, submitter(-(-fill // SUBMIT_THREADS)))
    progress(f"{name}: {counts.late} submits, one at a time, with the queue full")
    late = [main.timed("POST", "/v1/jobs/submit", {"command": "true"}) for _ in range(counts.late)]

    progress(f"{name}: the first detailed listing")
    listing, listing_ms, _ = main.listing(name, {"details": "true", "listing": "true"})
    progress(f"{name}: listed {len(listing)} jobs in {listing_ms:.0f} ms")
    scaled: dict[str, Any] = {}
    if counts.scale > counts.jobs:
        queued = max(counts.jobs, submitted) + counts.late
        fill = counts.scale - queued
        progress(f"{name}: {fill} more submits to hold {counts.scale} jobs (issue 27: flat from 0 to {counts.scale})")
        in_threads(SUBMIT_THREADS, submitter(-(-fill // SUBMIT_THREADS)))
        at_scale = [main.timed("POST", "/v1/jobs/submit", {"command": "true"}) for _ in range(counts.late)]
        params = {"details": "true", "listing": "true", "limit": str(counts.scale + counts.late + 8)}
        big, big_ms, decode_ms = main.listing(name, params)
        again = [main.listing(name, params)[1] for _ in range(LISTING_REPEATS)]
        progress(f"{name}: listed {len(big)} jobs in {big_ms:.0f} ms (then {statistics.median(again):.0f} ms)")
        scaled = {
            "scale_jobs": counts.scale,
            "submit_p50_scale_ms": round(statistics.median(at_scale), 2),
            "listing_scale_ms": round(big_ms, 1),
            "listing_scale_again_ms": round(statistics.median(again), 1),
            "listing_scale_decode_ms": round(decode_ms, 1),
            "listing_scale_count": len(big),
        }
    pid = testing.listening_pid(int(urlsplit(url).port or 0))
    main.close()
    return {
        "server": name,
        "get_rps_1": round(rps_1, 1),
        "get_rps_8": round(rps_8, 1),
        "submit_p50_ms": round(statistics.median(one_by_one), 2),
        "submit_p95_ms": round(percentile(one_by_one, 0.95), 2),
        "submit_p50_1000_ms": round(statistics.median(late), 2),
        "submit_threads_per_s": round(per_thread * SUBMIT_THREADS / threaded_s, 1),
        "get_p50_idle_ms": round(statistics.median(idle), 2),
        "get_p50_during_submits_ms": round(statistics.median(during), 2) if during else None,
        "listing_1000_ms": round(listing_ms, 1),
        "rss_mb": round(testing.rss_mb(pid), 1) if pid else None,
        **scaled,
    }


@contextlib.contextmanager
def running(name: str, tmp: Path) -> Iterator[str]:
    """One server (and, for the flux-core ones, a fresh flux-core instance under it); yields its URL."""
    if name == "builtin":
        servers = testing.start_server(tmp, size=2)
        server = next(servers)
        try:
            yield server.url
        finally:
            for _ in servers:
                pass
        return
    from miniclusters.backends.local.flux_view import FluxCoreNotFound, find_flux_core

    try:
        core = find_flux_core()
    except FluxCoreNotFound as exc:
        raise SystemExit(f"{name}: needs real flux-core ({exc}); `make flux-core` builds it") from None
    if core.python_path is None:
        raise SystemExit(f"flux-core at {core.prefix} has no Python bindings")
    start = testing.reference_server if name == "reference" else testing.flux_flavour_server
    with testing.real_flux(core.flux, core.python_path, tmp) as env, start(env, tmp) as url:
        yield url


def table(results: list[dict[str, Any]]) -> str:
    names = [r["server"] for r in results]
    reference = next((r for r in results if r["server"] == "reference"), None)
    header = f"{'measure':<28}" + "".join(f"{n:>12}" for n in names)
    if reference:
        header += "".join(f"{n + '/ref':>13}" for n in names if n != "reference")
    lines = [header, "-" * len(header)]
    for key in KEYS:
        row = f"{key:<28}" + "".join(f"{_text(r.get(key)):>12}" for r in results)
        if reference:
            for r in results:
                if r["server"] != "reference":
                    ratio = _ratio(r.get(key), reference.get(key))
                    row += f"{ratio:>13}"
        lines.append(row)
    if reference:
        lines.append("(ratios: ours / the reference; higher is better for rps and submits per second, lower for ms)")
    return "\n".join(lines)


def _text(value: Any) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _ratio(ours: Any, theirs: Any) -> str:
    if not isinstance(ours, int | float) or not isinstance(theirs, int | float) or not theirs:
        return "-"
    return f"{ours / theirs:.2f}x"


def verdicts(results: list[dict[str, Any]]) -> list[str]:
    """Issue 30's acceptance, said for this run."""
    by_name = {r["server"]: r for r in results}
    out = []
    if "reference" in by_name and "flux" in by_name:
        ours, theirs = by_name["flux"]["submit_threads_per_s"], by_name["reference"]["submit_threads_per_s"]
        out.append(
            f"flux flavour 4-thread submits {ours:g}/s vs the reference's {theirs:g}/s: "
            f"{'met' if ours >= theirs else 'NOT met'} (>=)"
        )
    for name in ("flux", "builtin"):
        if name in by_name:
            idle, during = by_name[name]["get_p50_idle_ms"], by_name[name]["get_p50_during_submits_ms"]
            met = during is not None and during <= 2 * idle
            out.append(
                f"{name}: GET p50 during submits {_text(during)} ms vs idle {idle:g} ms: "
                f"{'met' if met else 'NOT met'} (<= 2x)"
            )
    out.extend(issue_27_verdicts(by_name))
    return out


def issue_27_verdicts(by_name: dict[str, dict[str, Any]]) -> list[str]:
    """Issue 27's REST targets for the built-in flavour: GET rate >= 4x the reference's (same run), submit p50
    <= 3 ms from an empty queue to a full one (--scale), the detailed listing of that many jobs <= 100 ms."""
    ours = by_name.get("builtin")
    if ours is None:
        return []
    out = []
    theirs = by_name.get("reference")
    if theirs:
        ratio = ours["get_rps_1"] / theirs["get_rps_1"] if theirs["get_rps_1"] else 0.0
        verdict = "met" if ratio >= 4 else "NOT met"
        out.append(f"issue 27: builtin GET rate {ratio:.2f}x the reference's: {verdict} (>= 4x)")
    p50s = [ours["submit_p50_ms"], ours.get("submit_p50_scale_ms")]
    shown = " -> ".join(f"{v:g}" for v in p50s if v is not None)
    scale = ours.get("scale_jobs")
    met = all(v is not None and v <= 3 for v in p50s)
    where = f"empty queue -> {scale} jobs" if scale else "empty queue only (pass --scale 5000)"
    out.append(f"issue 27: builtin submit p50 {shown} ms ({where}): {'met' if met else 'NOT met'} (<= 3 ms)")
    if scale:
        listing = ours["listing_scale_ms"]
        out.append(
            f"issue 27: builtin detailed listing of {ours['listing_scale_count']} jobs {listing:g} ms "
            f"(then {ours['listing_scale_again_ms']:g}; the client's json.loads {ours['listing_scale_decode_ms']:g} "
            f"more): {'met' if listing <= 100 else 'NOT met'} (<= 100 ms)"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", action="store_true", help="measure flux-restful 1.1.0 and both flavours")
    parser.add_argument("--servers", help=f"comma-separated subset of {','.join(SERVERS)} (default: builtin)")
    parser.add_argument("--gets", type=int, default=Counts.gets, help="GETs from one client")
    parser.add_argument("--gets-8", type=int, default=Counts.gets_8, help="GETs from 8 clients, in all")
    parser.add_argument("--submits", type=int, default=Counts.submits, help="submits one at a time")
    parser.add_argument("--threaded", type=int, default=Counts.threaded, help="submits from 4 threads, in all")
    parser.add_argument("--jobs", type=int, default=Counts.jobs, help="jobs in the queue for the late figures")
    parser.add_argument("--late", type=int, default=Counts.late, help="submits one at a time, queue full")
    parser.add_argument(
        "--scale", type=int, default=Counts.scale, help="then fill the queue to this many jobs (issue 27: 5000)"
    )
    parser.add_argument("--record", action="store_true", help="write the run's figures into bench/results.toml")
    args = parser.parse_args()
    if args.servers:
        names = [n.strip() for n in args.servers.split(",") if n.strip()]
        unknown = [n for n in names if n not in SERVERS]
        if unknown:
            parser.error(f"--servers: unknown {', '.join(unknown)} (choose from {', '.join(SERVERS)})")
    else:
        names = list(SERVERS) if args.reference else ["builtin"]
    for flag, least in (("gets", 1), ("gets_8", 8), ("submits", 1), ("threaded", SUBMIT_THREADS), ("late", 1)):
        if getattr(args, flag) < least:
            parser.error(f"--{flag.replace('_', '-')}: at least {least}")
    counts = Counts(args.gets, args.gets_8, args.submits, args.threaded, args.jobs, args.late, args.scale)
    results = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"bench-rest-{name}-") as tmp:
            progress(f"{name}: starting")
            with running(name, Path(tmp)) as url:
                results.append(measure(name, url, counts))
    load = os.getloadavg()
    print(f"REST API, auth on (bearer token); {os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f}")
    print(table(results))
    for line in verdicts(results):
        print(line)
    for result in results:
        print(json.dumps(result))
    if args.record:
        from docsgen.benchmarks import record_result

        record_result("rest", {"bench": "rest", "load_average": round(load[0], 1), "servers": results})


if __name__ == "__main__":
    main()
