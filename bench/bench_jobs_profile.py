"""Where the broker's CPU goes per trivial job (issue 45): `flux start --test-size=1 flux submit --cc=1-N --wait true`
with the lead broker's loop measured twice in the same run, plain (its CPU from getrusage, per job) and under
cProfile on the CPU clock (where it goes), each also with one job so that the instance's own start, stop and
first-use imports are taken out of both. Each function's share of the profile is scaled to the plain run's CPU
per job, so the table reads in microseconds of broker CPU per job; the profiler's own cost falls out of the
shares. Prints the table (own time, then time including callees for the parts of a job's path) and a JSON line.

    .venv/bin/python bench/bench_jobs_profile.py [--jobs 1000] [--top 20]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLUX = str(Path(sys.executable).with_name("flux"))
PATH_PARTS = {  # a job's path through the broker: (file, function) -> its key in the JSON line, and what it is
    ("routing.py", "on_client"): ("client_in_us", "client messages in (decode, dispatch; submit included)"),
    ("queue.py", "svc_submit"): ("submit_us", "  submit: validate, journal, acknowledge"),
    ("queue.py", "schedule"): ("scheduling_us", "scheduling passes (job starts included)"),
    ("executions.py", "start"): ("exec_start_us", "  a job's start in the job manager (job-exec included)"),
    ("job_exec.py", "start"): ("job_exec_start_us", "    job-exec.start on the rank"),
    ("job_exec.py", "_spawn"): ("spawn_us", "      starting the task (pipes, posix_spawn, readers)"),
    ("job_dirs.py", "make"): ("tmpdir_us", "      the job's tmpdir"),
    ("job_exec.py", "_on_exit"): ("exit_us", "a task's exit (reap, report, completion)"),
    ("executions.py", "svc_exec_done"): ("completion_us", "  completion in the job manager"),
    ("journal_writer.py", "append"): ("journal_us", "journal batches (encoding)"),
    ("poll.py", "poll"): ("poll_us", "the loop's poll"),
}


def inner(profile_to: str | None) -> None:
    """Run `flux start ...` here with the broker's loop wrapped: getrusage, or cProfile on the CPU clock."""
    from broker import testsize
    from broker.cli.flux import main as flux_main

    plain = testsize.run_broker  # type: ignore[attr-defined]

    def measured(options: object) -> int:
        profiler = cProfile.Profile(time.process_time) if profile_to else None
        if profiler is not None:
            profiler.enable()
        try:
            return plain(options)  # type: ignore[arg-type]
        finally:
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(str(profile_to))
            used = resource.getrusage(resource.RUSAGE_SELF)
            print(f"BROKER_CPU {used.ru_utime + used.ru_stime}", file=sys.stderr, flush=True)

    testsize.run_broker = measured  # type: ignore[attr-defined]
    flux_main(sys.argv[sys.argv.index("--") + 1 :])


def run(jobs: int, profile_to: str | None) -> float:
    """The broker's CPU seconds for the whole instance (start-up included)."""
    command = [sys.executable, __file__, "--inner", *(["--profile-to", profile_to] if profile_to else []), "--"]
    command += ["start", "--test-size=1", FLUX, "submit", "--quiet", f"--cc=1-{jobs}", "--wait", "true"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"the instance failed: {done.stderr[-1500:]}")
    return float(next(line.split()[1] for line in done.stderr.splitlines() if line.startswith("BROKER_CPU")))


ProfileKey = tuple[str, int, str]


def per_job_profile(jobs: int) -> dict[ProfileKey, tuple[float, float, float, float]]:
    """Each function's profile with `jobs` jobs less its profile with one: what one-time work costs (the job
    manager's first-use import was about a tenth of a 1,000-job profile, all of it under `client_in`) is out of
    the shares, as the plain run's CPU per job has the one-job run's taken out. (calls, -, own s, with callees s)"""
    profiles = []
    with tempfile.TemporaryDirectory() as tmp:
        for count in (1, jobs):
            path = os.path.join(tmp, f"broker-{count}.prof")
            run(count, path)
            profiles.append(pstats.Stats(path).stats)  # type: ignore[attr-defined]
    once, full = profiles
    entries = {}
    for key, value in full.items():
        base = once.get(key, (0, 0, 0.0, 0.0, {}))
        entries[key] = (value[1] - base[1], 0.0, max(0.0, value[2] - base[2]), max(0.0, value[3] - base[3]))
    return entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profile-to", help=argparse.SUPPRESS)
    opts, _rest = parser.parse_known_args()
    if opts.inner:
        inner(opts.profile_to)
        return
    idle = run(1, None)  # the instance's own start and stop, with one job
    plain = run(opts.jobs, None)
    per_job_us = (plain - idle) / (opts.jobs - 1) * 1e6
    entries = per_job_profile(opts.jobs)
    loop = [v for k, v in entries.items() if k[0].endswith("loop.py") and k[2] == "run"]
    total = loop[0][3] if loop else sum(v[2] for v in entries.values())
    scale = per_job_us / total  # a share of the profiled loop -> us of plain CPU per job
    print(
        f"broker CPU per job: {per_job_us:.0f} us ({opts.jobs} jobs, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}; start and stop, {idle:.2f} s, taken out)"
    )
    print(f"\n{'own time, us/job':>18}  function")
    for key, value in sorted(entries.items(), key=lambda kv: -kv[1][2])[: opts.top]:
        print(f"{value[2] * scale:>18.1f}  {Path(key[0]).name}:{key[2]}")
    print(f"\n{'with callees, us/job':>20}  part of a job's path")
    parts: dict[str, float] = {}
    for (file, _line, name), value in entries.items():
        part = PATH_PARTS.get((Path(file).name, name))
        if part is not None:
            parts[part[0]] = parts.get(part[0], 0.0) + value[3] * scale
    for part_key, label in PATH_PARTS.values():
        print(f"{parts.get(part_key, 0.0):>20.1f}  {label}")
    figures = {key: round(value, 1) for key, value in parts.items()}
    print(json.dumps({"bench": "jobs_profile", "broker_cpu_us_per_job": round(per_job_us, 1), **figures}))


if __name__ == "__main__":
    main()
