"""REST API throughput and latency with auth on, against a real instance and a real uvicorn server.

Prints GET /v1/jobs/{id} requests per second (several keep-alive clients in threads) and POST /v1/jobs/submit
latency (median, p99). Targets (issue 7): >= 300 requests/s; submit median <= 20 ms.

    .venv/bin/python bench/bench_rest.py [--requests 3000] [--clients 4] [--submits 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from broker.rest.client import RestClient
from broker.rest.testing import SECRET_KEY, SUPERUSER, start_server


def requests_per_second(url: str, token: str, jobid: int, total: int, clients: int) -> float:
    per_client = total // clients
    errors: list[str] = []

    def worker() -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            for _ in range(per_client):
                response = http.get(f"/v1/jobs/{jobid}")
                if response.status_code != 200:
                    errors.append(response.text)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise SystemExit(f"{len(errors)} failed requests, e.g. {errors[0][:200]}")
    return per_client * clients / elapsed


def submit_latencies(url: str, token: str, count: int) -> list[float]:
    latencies = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        for _ in range(count):
            started = time.perf_counter()
            response = http.post("/v1/jobs/submit", params={"command": "true"})
            latencies.append((time.perf_counter() - started) * 1000)
            if response.status_code != 200:
                raise SystemExit(f"submit failed: {response.text[:200]}")
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--submits", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-rest-") as tmp:
        servers = start_server(Path(tmp), size=1)
        server = next(servers)
        try:
            client = RestClient(server.url, user=SUPERUSER[0], token=SUPERUSER[1], secret_key=SECRET_KEY)
            token = client.login()
            jobid = client.submit("true")
            rps = requests_per_second(server.url, token, jobid, args.requests, args.clients)
            latencies = sorted(submit_latencies(server.url, token, args.submits))
            median = statistics.median(latencies)
            p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        finally:
            for _ in servers:
                pass
    load = os.getloadavg()[0]
    print(f"REST API benchmark (auth on, bearer token; {os.cpu_count()} CPUs, load average {load:.1f})")
    print(f"{'measure':<40} {'value':>10}  target")
    print(f"{'GET /v1/jobs/{id} requests/s':<40} {rps:>10.0f}  >= 300")
    print(f"{'POST /v1/jobs/submit median (ms)':<40} {median:>10.1f}  <= 20")
    print(f"{'POST /v1/jobs/submit p99 (ms)':<40} {p99:>10.1f}")


if __name__ == "__main__":
    main()
