"""The NACA0012 campaign two ways on this machine: rigid vs with the loops (issue 26).

rigid: the cluster at maxSize from the start, every pod holding the container's CPU request throughout, no
autoscaler, no multiplexer, one ensemble after the other (what a user provisioning for the peak does). "Equal
CPU" (the issue's words) is `rigid`: each pod gets exactly its request (a CPU limit equal to it: Guaranteed QoS,
the pod cgroup's CFS quota; as pods on nodes of that size), so the running ensemble cannot borrow the idle pod's
CPU. `rigid-shared` is the same run with requests only: on this one machine the running ensemble then also uses
the idle pod's core, which a rigid cluster of separate nodes cannot do.
loops: examples/naca0012-campaign.yaml as written: size 1, growing when an ensemble waits and shrinking when
done (autoscale), pods resized in place from the members' PMPI duty cycles (multiplexing), ensembles queued at once.

All run `minicluster up` on the same spec (same ensembles, members, iterations), in a private state directory.
makespan = first ensemble submitted -> last ensemble ended; CPU-seconds requested = the integral of the pods'
CPU requests over the controller's samples until the campaign ended (for loops, that includes the shrink back
to one pod). Prints a table, then one JSON line (the issue's keys against the first rigid baseline, plus
`rigid_cpus` and, with both baselines, `makespan_rigid_shared`, `speedup_vs_shared`,
`cpu_seconds_requested_rigid_shared`):
{"members", "members_ok", "makespan_rigid", "makespan_loops", "speedup", "cpu_seconds_requested_rigid",
 "cpu_seconds_requested_loops", "resizes", "scale_events", "restarts", ...}

    .venv/bin/python bench/bench_campaign.py [--spec examples/naca0012-campaign.yaml] [--iterations N]
        [--order rigid-first|loops-first] [--rigid both|limited|shared] [--record]

Needs root (the local backend's network namespaces and cgroups) and Debian's openfoam + openfoam-examples. The
machine is shared: run-to-run noise from other processes is large, so the figures are one measurement each.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
MINICLUSTER = str(Path(sys.executable).with_name("minicluster"))


RIGID_MODES = {"rigid": "limited", "rigid-shared": "shared"}
"""The two rigid baselines and how their pods hold CPU (spec.placement.cpus)."""


def variant(base: dict[str, Any], mode: str, workdir: Path) -> dict[str, Any]:
    data = copy.deepcopy(base)
    spec = data["spec"]
    data["metadata"]["name"] = f"bench-campaign-{mode}"
    spec["campaign"]["workdir"] = str(workdir / mode)
    if mode in RIGID_MODES:
        spec["size"] = spec.get("maxSize", spec.get("size", 1))
        spec["autoscale"] = {"enabled": False}
        spec["multiplexing"] = {"enabled": False}
        spec["campaign"]["sequential"] = True
        if RIGID_MODES[mode] == "limited":
            # equal CPU: each pod gets exactly its request (a CPU limit equal to it, Guaranteed QoS, enforced by
            # the pod cgroup's CFS quota), so the running ensemble cannot borrow the idle pod's CPU, as on nodes
            # of the request's size
            resources = spec["containers"][0].setdefault("resources", {})
            cpu = resources.get("requests", {}).get("cpu", "1")
            resources.setdefault("limits", {})["cpu"] = cpu
    return data


def run(data: dict[str, Any], folder: Path, state: Path) -> dict[str, Any]:
    spec = folder / f"{data['metadata']['name']}.yaml"
    spec.write_text(yaml.safe_dump(data))
    env = {**os.environ, "MINICLUSTERS_STATE_DIR": str(state), "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}  # fmt: skip
    started = time.monotonic()
    print(f"--- {data['metadata']['name']}: minicluster up {spec}", file=sys.stderr, flush=True)
    result = subprocess.run([MINICLUSTER, "up", str(spec)], env=env, text=True, stdout=sys.stderr, timeout=1800)
    wall = time.monotonic() - started
    name = data["metadata"]["name"]
    try:
        saved = json.loads((state / ".campaign" / f"{name}.json").read_text())
    except OSError:
        why = f"{name}: `minicluster up` exited {result.returncode} before its campaign ran (see above)"
        raise SystemExit(why) from None
    events = [json.loads(line) for line in (Path(saved["events"])).read_text().splitlines() if line.strip()]
    submitted = [e["t"] for e in events if e["kind"] == "submitted"]
    ended = [e["t"] for e in events if e["kind"] in ("ensemble-done", "ensemble-cancelled")]
    restarts = max((e.get("restarts", 0) for e in events if e["kind"] == "sample"), default=0)
    return {
        "rc": result.returncode,
        "wall": wall,
        "makespan": max(ended) - min(submitted) if ended and submitted else float("nan"),
        "members": len(saved.get("members", [])),
        "members_ok": sum(1 for m in saved.get("members", []) if m["state"] == "done"),
        "cpu_seconds": float(saved.get("cpu_seconds_requested") or 0.0),
        "resizes": int(saved.get("resizes") or 0),
        "scale_events": int(saved.get("scale_events") or 0),
        "restarts": int(restarts),
        "files": saved.get("files", []),
    }


def compare(rigid: dict[str, Any], loops: dict[str, Any]) -> tuple[float, float]:
    """(speedup of the loops over this rigid run, the fraction of CPU-seconds requested they save)."""
    speedup = rigid["makespan"] / loops["makespan"] if loops["makespan"] else float("nan")
    saved = 1 - loops["cpu_seconds"] / rigid["cpu_seconds"] if rigid["cpu_seconds"] else float("nan")
    return speedup, saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=Path, default=ROOT / "examples" / "naca0012-campaign.yaml")
    parser.add_argument("--iterations", type=int, help="override spec.campaign.iterations")
    parser.add_argument("--order", choices=("rigid-first", "loops-first"), default="rigid-first")
    parser.add_argument(
        "--rigid",
        choices=("both", "limited", "shared"),
        default="both",
        help="the rigid baseline(s): pods limited to their request (limited, the issue's equal CPU), sharing "
        "the machine's cores (shared: the running ensemble borrows the idle pod's CPU), or both (default)",
    )
    parser.add_argument("--record", action="store_true", help="write the JSON line into bench/results.toml")
    args = parser.parse_args(argv)
    base = yaml.safe_load(args.spec.read_text())
    if args.iterations:
        base["spec"]["campaign"]["iterations"] = args.iterations
    folder = Path(tempfile.mkdtemp(prefix="mcbench-campaign-"))
    state = Path(tempfile.mkdtemp(prefix="mcb", dir="/tmp"))  # short: broker sockets live below it
    rigid_modes = {"both": ["rigid", "rigid-shared"], "limited": ["rigid"], "shared": ["rigid-shared"]}[args.rigid]
    modes = [*rigid_modes, "loops"] if args.order == "rigid-first" else ["loops", *rigid_modes]
    try:
        results = {mode: run(variant(base, mode, folder), folder, state) for mode in modes}
    finally:
        shutil.rmtree(state, ignore_errors=True)  # the clusters are gone; the work folder keeps the results
    print(f"{'':14}{'rc':>4}{'members ok':>12}{'makespan s':>12}{'wall s':>9}{'CPU-s req':>11}{'resizes':>9}"
          f"{'scale':>7}{'restarts':>10}", file=sys.stderr)  # fmt: skip
    for mode in [*rigid_modes, "loops"]:
        r = results[mode]
        row = f"{mode:14}{r['rc']:>4}{r['members_ok']:>6}/{r['members']:<5}{r['makespan']:>12.1f}{r['wall']:>9.1f}"
        row += f"{r['cpu_seconds']:>11.1f}{r['resizes']:>9}{r['scale_events']:>7}{r['restarts']:>10}"
        print(row, file=sys.stderr)
    loops = results["loops"]
    for path in loops["files"]:
        print(f"loops run wrote {path}", file=sys.stderr)
    for mode in rigid_modes:
        speedup, saved = compare(results[mode], loops)
        print(f"vs {mode}: speedup {speedup:.2f} (target >= 1.3); CPU-seconds requested {saved:.0%} fewer "
              "(target >= 40%)", file=sys.stderr)  # fmt: skip
    rigid = results[rigid_modes[0]]
    speedup, _ = compare(rigid, loops)
    line: dict[str, Any] = {
        "members": loops["members"],
        "members_ok": min(r["members_ok"] for r in results.values()),
        "makespan_rigid": round(rigid["makespan"], 1),
        "makespan_loops": round(loops["makespan"], 1),
        "speedup": round(speedup, 2),
        "cpu_seconds_requested_rigid": round(rigid["cpu_seconds"], 1),
        "cpu_seconds_requested_loops": round(loops["cpu_seconds"], 1),
        "resizes": loops["resizes"],
        "scale_events": loops["scale_events"],
        "restarts": sum(r["restarts"] for r in results.values()),
        "rigid_cpus": RIGID_MODES[rigid_modes[0]],
    }
    if len(rigid_modes) == 2:
        shared = results["rigid-shared"]
        line["makespan_rigid_shared"] = round(shared["makespan"], 1)
        line["speedup_vs_shared"] = round(compare(shared, loops)[0], 2)
        line["cpu_seconds_requested_rigid_shared"] = round(shared["cpu_seconds"], 1)
    print(json.dumps(line))
    if args.record:
        from docsgen.benchmarks import record_result

        record_result("campaign", line)
    return 0 if all(r["rc"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
