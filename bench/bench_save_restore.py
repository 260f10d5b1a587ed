"""Save and restore of a queue with real brokers (prints figures and one JSON line).

A 2-broker instance runs `--done` jobs to completion (each printing a line), then holds `--pending` more in a
stopped queue; `flux queue save` writes the archive (timed), the instance stops, and a 1-broker instance restores
it (`-Scontent.restore`): the time until its lead answers with every job listed, then until the restored queue
has drained. Checks that every id came back and ran once.

    .venv/bin/python bench/bench_save_restore.py [--done 1000] [--pending 1000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from broker.jobs.api import JobClient
from broker.jobs.jobspec import build_jobspec
from broker.testing import Instance, kill_orphans, render_instance
from docsgen.benchmarks import record_result


def _start(inst: Instance, ranks: int, *extra: str) -> JobClient:
    for rank in range(ranks):
        inst.start(rank, "-Sresource.cores=0-1", *(extra if rank == 0 else ()))
    inst.wait_states({rank: "up" for rank in range(ranks)}, timeout=60)
    return JobClient(inst.uri(0))


def _submit(client: JobClient, words: list[str], count: int) -> list[int]:
    handle = client.handle
    tags = [
        handle.send_request("job-manager.submit", {"jobspec": build_jobspec([*words, str(i)], cwd="/tmp")})  # type: ignore[attr-defined]
        for i in range(count)
    ]
    return [int(handle.wait(tag)["id"]) for tag in tags]  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--done", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--record", action="store_true", help="write the JSON line into bench/results.toml")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bsr", dir="/tmp"))
    archive = root / "queue.tar.gz"
    (root / "old").mkdir()
    old = render_instance(root / "old", 2)
    try:
        with _start(old, 2, f"-Sstatedir={root / 'old-state'}", "-Sjob-manager.fsync=false") as client:
            print(f"running {args.done} jobs, then holding {args.pending} in a stopped queue ...", flush=True)
            done = _submit(client, ["echo", "done"], args.done)
            client.queue_idle("drain", timeout=600)
            client.queue("stop")
            pending = _submit(client, ["echo", "pending"], args.pending)
            start = time.perf_counter()
            saved = client.queue_save(str(archive), cluster="bench")
            save_s = time.perf_counter() - start
    finally:
        old.cleanup()
        kill_orphans(old.uri(0))
    (root / "new").mkdir()
    new = render_instance(root / "new", 1)
    try:
        start = time.perf_counter()
        restore = [f"-Sstatedir={root / 'new-state'}", f"-Scontent.restore={archive}", "-Sjob-manager.fsync=false"]
        with _start(new, 1, *restore) as client:
            listed = {info.id for info in client.jobs("all")}
            online_s = time.perf_counter() - start
            client.queue_idle("drain", timeout=600)
            drain_s = time.perf_counter() - start - online_s
            inactive = client.jobs("inactive")
            ran_once = all(client.output_text(j) == f"pending {i}\n" for i, j in enumerate(pending[:50]))
    finally:
        new.cleanup()
        kill_orphans(new.uri(0))
    assert listed == set(done) | set(pending), "a job was lost or added"
    assert len(inactive) == len(listed) and all(i.success for i in inactive) and ran_once
    size_kb = archive.stat().st_size / 1024
    print(f"save ({saved['jobs']} jobs, archive {size_kb:.0f} KiB): {save_s * 1000:.0f} ms")
    print(f"restore: lead answering with every job listed after {online_s:.2f} s (start-up included)")
    print(f"restored queue of {args.pending} drained in {drain_s:.2f} s")
    figures = {"jobs": saved["jobs"], "save_ms": round(save_s * 1000), "archive_kib": round(size_kb)}
    figures |= {"restore_online_s": round(online_s, 2), "drain_s": round(drain_s, 2)}
    print(json.dumps({"bench": "save_restore", **figures}))
    if args.record:
        record_result("save_restore", {"bench": "save_restore", **figures})


if __name__ == "__main__":
    main()
