"""Run by the broker image's build inside the bundle: every module of our packages imports (no dependency was
left out of the frozen part) and the data files they load at run time are there."""

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

PACKAGES = ("common", "miniclusters", "broker", "elasticity", "bursting")
DATA = ("broker/rest/web/templates", "elasticity/pmpi/mc_pmpi.c", "miniclusters/backends/local/supervisor.py")


def main() -> int:
    failed = []
    count = 0
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            parts = info.name.split(".")
            if "testing" in parts or parts[-1] == "__main__":
                continue  # test helpers need the dev extras; __main__ modules run a command when imported
            try:
                importlib.import_module(info.name)
                count += 1
            except Exception as error:  # report every one, not just the first
                failed.append(f"{info.name}: {type(error).__name__}: {error}")
    # in a process of its own: the imports above loaded the whole kubernetes client, hiding what a command that
    # never imports it meets (a quantity parsed in a pod: `minicluster campaign prepare` in the lead)
    fresh = subprocess.run(
        [sys.executable, "-c", "from elasticity.model.resources import parse_quantity; print(parse_quantity('500m'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    if fresh.stdout.strip() != "0.500":
        failed.append(f"parse_quantity in a fresh process: {fresh.stdout.strip()} {fresh.stderr.strip()[-300:]}")
    root = Path(importlib.import_module("miniclusters").__file__).resolve().parents[1]
    failed += [f"missing data file {path}" for path in DATA if not (root / path).exists()]
    for line in failed:
        print(f"check_bundle: {line}", file=sys.stderr)
    print(f"check_bundle: {count} modules import{'' if not failed else f', {len(failed)} problems'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
