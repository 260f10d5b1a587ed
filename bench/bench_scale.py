"""Instance start-up against size and tree fan-out: measured up to 256 brokers, a model fitted to those runs
(broker/bootstrap_model.py) that predicts 1,024 and 4,096, the prediction checked at 512, and flux-core's
`flux start --test-size=256` beside ours (issue 27's scale target: <= 5 s at 256).

Run: .venv/bin/python bench/bench_scale.py [--sizes 16,32,64,128,256] [--fanouts 2,8,32] [--check 512]
     [--repeat 3] [--no-flux-core] [--png docs/scale.png] [--record]
Prints a table of runs, the fitted terms, the check, the predictions and one JSON line; writes a PNG of the fit.
Every broker here shares this machine's cores, so the model describes this machine; it is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker.bootstrap_model import Run, fit, prediction_table, relative_error
from broker.testing import FLUX

DEFAULT_FANOUT = 32  # both flux-core's and ours (broker/topology.py)


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def online_seconds(flux: str, size: int, fanout: int | None, workdir: Path) -> float:
    """Seconds from `flux start` until its initial program runs (every broker up: the quorum is the whole size)."""
    marker = workdir / f"online-{size}-{fanout}-{time.monotonic_ns()}"
    argv = [flux, "start", f"--test-size={size}"]
    if fanout is not None:
        argv.append(f"-Stbon.fanout={fanout}")
    start_ns = time.time_ns()
    done = subprocess.run([*argv, "touch", str(marker)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or not marker.exists():
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return (marker.stat().st_mtime_ns - start_ns) / 1e9


def plot(path: Path, runs: list[Run], model_runs: list[Run], checks: list[Run], predict_to: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = fit(model_runs)
    figure, axes = plt.subplots(figsize=(7.5, 4.5))
    fanouts = sorted({r.fanout for r in runs})
    sizes = [2**i for i in range(3, predict_to.bit_length())]
    for k, colour in zip(fanouts, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False):
        axes.plot(sizes, [model.predict(n, k) for n in sizes], "-", color=colour, label=f"model, kary:{k}")
        fitted = [r for r in model_runs if r.fanout == k]
        axes.plot([r.size for r in fitted], [r.seconds for r in fitted], "o", color=colour)
        checked = [r for r in checks if r.fanout == k]
        axes.plot([r.size for r in checked], [r.seconds for r in checked], "*", color=colour, markersize=12)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("brokers (one machine, 2 cores)")
    axes.set_ylabel("seconds until online")
    axes.set_title("Start-up: measured (dots), checked beyond the fit (stars), model (lines)")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _arguments() -> tuple[argparse.Namespace, list[int], list[int], list[int]]:
    """The command line, checked: (args, sizes, fanouts, sizes to predict)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="16,32,64,128,256", help="sizes the model is fitted from")
    parser.add_argument("--fanouts", default="2,8,32", help="tree fan-outs (tbon.fanout) to fit over")
    parser.add_argument("--check", type=int, default=512, help="a size beyond the fit, measured to check it")
    parser.add_argument("--predict", default="1024,4096", help="sizes to predict")
    parser.add_argument(
        "--repeat", type=int, default=3, help="starts per point, the median kept (one start swings with the load)"
    )
    parser.add_argument("--no-flux-core", action="store_true", help="skip flux-core's run at 256")
    parser.add_argument("--png", type=Path, default=Path("docs/scale.png"), help="where the fit's figure goes")
    parser.add_argument("--record", action="store_true", help="write the run's JSON line into bench/results.toml")
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        fanouts = [int(k) for k in args.fanouts.split(",")]
        predicted_sizes = [int(s) for s in args.predict.split(",")]
    except ValueError as exc:
        parser.error(f"--sizes, --fanouts and --predict take comma-separated integers: {exc}")
    if len(set(sizes)) < 3 or len(set(fanouts)) < 2:
        parser.error("--sizes needs three sizes or more and --fanouts two or more (the model has five terms)")
    if args.repeat < 1:
        parser.error(f"--repeat: at least 1 start per point, got {args.repeat}")
    if args.check <= max(sizes):
        parser.error(f"--check: {args.check} is within the fitted sizes (up to {max(sizes)}); give a larger one")
    return args, sizes, fanouts, predicted_sizes


def _flux_core_seconds(workdir: Path) -> float | None:
    """flux-core's 256-broker start until online, or None when it fails twice."""
    from miniclusters.backends.local.flux_view import FluxCoreNotFound, find_flux_core

    try:
        core = find_flux_core()
    except FluxCoreNotFound as exc:
        raise SystemExit(f"flux-core: {exc}; `make flux-core` builds it, or pass --no-flux-core") from None
    for attempt in (1, 2):  # its 256-broker start is sometimes killed here under load (exit 137)
        progress(f"flux-core: 256 brokers, its default kary:32 (attempt {attempt})")
        try:
            return online_seconds(str(core.flux), 256, None, workdir)
        except SystemExit as exc:
            progress(f"flux-core's start failed: {str(exc)[:300]}")
    return None


def main() -> None:
    args, sizes, fanouts, predicted_sizes = _arguments()
    load = os.getloadavg()  # before the runs: after them it says only how many brokers just ran
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        workdir = Path(tmp)
        spread: dict[tuple[int, int], list[float]] = {}

        def measure(n: int, k: int, what: str = "") -> Run:
            times = []
            for attempt in range(1, args.repeat + 1):
                progress(f"ours: {n} brokers, kary:{k}{what} ({attempt}/{args.repeat})")
                times.append(online_seconds(FLUX, n, k, workdir))
            spread[(n, k)] = times
            return Run(n, k, statistics.median(times))

        runs = [measure(n, k) for k in fanouts for n in sizes]
        checks = [measure(args.check, k, " (the check)") for k in sorted({DEFAULT_FANOUT, min(fanouts)} & set(fanouts))]
        core_seconds = None if args.no_flux_core else _flux_core_seconds(workdir)
    model = fit(runs)
    ours_256 = next((r.seconds for r in runs if r.size == 256 and r.fanout == DEFAULT_FANOUT), None)
    print(
        f"Start-up until online, median of {args.repeat}; {os.cpu_count()} CPUs, "
        f"load average before the runs {load[0]:.1f} {load[1]:.1f}"
    )
    print(f"{'brokers':>8} " + "".join(f"{'kary:' + str(k):>10}" for k in fanouts))
    for n in sizes:
        row = {r.fanout: r.seconds for r in runs if r.size == n}
        print(f"{n:>8} " + "".join(f"{row[k]:>9.2f}s" for k in fanouts))
    print("\nfitted model T(n, k) (broker/bootstrap_model.py):")
    for term, value in model.describe():
        print(f"  {term:<28} {value * 1000:>9.3f} ms")
    worst = max(abs(r) / run.seconds for r, run in zip(model.residuals(), runs, strict=True))
    print(f"  largest miss where fitted: {worst:.0%}")
    check_rows = []
    for run in checks:
        guess = model.predict(run.size, run.fanout)
        error = relative_error(guess, run.seconds)
        check_rows.append(
            {
                "size": run.size,
                "fanout": run.fanout,
                "measured_s": round(run.seconds, 2),
                "predicted_s": round(guess, 2),
                "error": round(error, 3),
            }
        )
        print(
            f"check at {run.size}, kary:{run.fanout}: measured {run.seconds:.2f} s, predicted {guess:.2f} s "
            f"({error:+.0%})"
        )
    print("\npredicted:")
    print(f"{'':>8} " + "".join(f"{n:>10}" for n in predicted_sizes))
    for cells in prediction_table(model, predicted_sizes, fanouts):
        print(f"{cells[0]:>8} " + "".join(f"{cell:>10}" for cell in cells[1:]))
    if ours_256 is not None:
        verdict = "met" if ours_256 <= 5.0 else "NOT met"
        line = f"\nissue 27: 256 brokers online in {ours_256:.2f} s (kary:32): {verdict} (<= 5 s)"
        if core_seconds is not None:
            line += f"; flux-core {core_seconds:.2f} s, ratio {core_seconds / ours_256:.1f}x"
        print(line)
    plot(args.png, runs + checks, runs, checks, max(predicted_sizes))
    print(f"figure: {args.png}")
    figures = {
        "bench": "scale",
        "load_average": round(load[0], 1),
        "repeat": args.repeat,
        "online_s": {f"{r.size}/kary:{r.fanout}": round(r.seconds, 3) for r in runs},
        "size_256_s": round(ours_256, 2) if ours_256 is not None else None,
        "flux_core_256_s": round(core_seconds, 2) if core_seconds is not None else None,
        "model_ms": {term: round(value * 1000, 3) for term, value in model.describe()},
        "check": check_rows,
        "check_runs_s": {f"{n}/kary:{k}": [round(t, 2) for t in spread[(n, k)]] for n, k in spread if n == args.check},
        "predicted_s": {f"{n}/kary:{k}": round(model.predict(n, k), 1) for n in predicted_sizes for k in fanouts},
    }
    print(json.dumps(figures))
    if args.record:
        from docsgen.benchmarks import record_result

        record_result("scale", figures)


if __name__ == "__main__":
    main()
