"""Job throughput and `flux run` latency on the built-in broker (prints figures).

Throughput: 1000 trivial jobs (`true`) submitted (pipelined, journal fsync on) and run to completion, in a
1-broker and a 4-broker `flux start --test-size` instance; wall time from the first submit to the queue
draining. Latency: wall time of `flux run true` including CLI start-up, median of 20.

    .venv/bin/python bench/bench_jobs.py [--jobs 1000] [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

FLUX = str(Path(sys.executable).with_name("flux"))


def inner_throughput(njobs: int) -> dict[str, float]:
    """Runs inside the instance: submit njobs `true` jobs, wait for the queue to drain."""
    from broker.cli.lean import connect
    from broker.jobs.api import JobClient
    from broker.jobs.jobspec import build_jobspec

    jobspec = build_jobspec(["true"], environment={"PATH": os.environ["PATH"]}, cwd="/tmp")
    with JobClient(handle=connect()) as client:
        handle = client.handle
        start = time.perf_counter()
        tags = [handle.send_request("job-manager.submit", {"jobspec": jobspec}) for _ in range(njobs)]
        ids = [handle.wait(tag)["id"] for tag in tags]
        submitted = time.perf_counter() - start
        client.queue_idle("drain", timeout=600)
        total = time.perf_counter() - start
        failed = [i for i in client.jobs("inactive") if not i.success]
        nodes = {i.nodelist for i in client.jobs("inactive")}
    return {"jobs": len(ids), "submit_s": submitted, "total_s": total, "failed": len(failed), "nodelists": len(nodes)}


def inner_latency(runs: int) -> dict[str, float]:
    times = []
    for _ in range(runs + 2):
        start = time.perf_counter()
        subprocess.run([FLUX, "run", "true"], check=True)
        times.append(time.perf_counter() - start)
    times = times[2:]  # first runs warm the page cache
    return {"median_ms": statistics.median(times) * 1000, "min_ms": min(times) * 1000, "max_ms": max(times) * 1000}


def outer(size: int, args: list[str]) -> dict[str, float]:
    command = [FLUX, "start", f"--test-size={size}", sys.executable, __file__, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"instance of size {size} failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--inner", choices=["throughput", "latency"])
    opts = parser.parse_args()
    if opts.inner == "throughput":
        print(json.dumps(inner_throughput(opts.jobs)))
        return
    if opts.inner == "latency":
        print(json.dumps(inner_latency(opts.runs)))
        return
    print(f"job throughput ({opts.jobs} x `true`, journal fsync on, {os.cpu_count()} CPUs)")
    for size in (1, 4):
        r = outer(size, ["--inner", "throughput", "--jobs", str(opts.jobs)])
        rate = r["jobs"] / r["total_s"]
        print(
            f"  {size} broker{'s' if size > 1 else ' '}: {rate:7.1f} jobs/s end to end "
            f"(submit {r['jobs'] / r['submit_s']:.0f}/s, total {r['total_s']:.2f} s, failed {r['failed']:.0f}, "
            f"distinct nodelists {r['nodelists']:.0f})"
        )
    lat = outer(1, ["--inner", "latency", "--runs", str(opts.runs)])
    print(
        f"flux run true latency (CLI start-up included, {opts.runs} runs): median {lat['median_ms']:.1f} ms "
        f"(min {lat['min_ms']:.1f}, max {lat['max_ms']:.1f})"
    )


if __name__ == "__main__":
    main()
