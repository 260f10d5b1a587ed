"""Run by the broker image's build inside the bundle: every module of our packages imports (no dependency was
left out of the frozen part) and the data files they load at run time are there.

    bin/python3 check_bundle.py          a copy with its extras (install.sh DEST --with-extras): every module
    bin/python3 check_bundle.py --core   a pod's copy without them: every module that needs no extra imports, and
                                         what a pod runs (broker, `flux`, REST server, burst service) is among them
"""

import importlib
import subprocess
import sys
from pathlib import Path

PACKAGES = ("common", "miniclusters", "broker", "elasticity", "bursting")
DATA = ("broker/rest/web/templates", "elasticity/pmpi/mc_pmpi.c", "miniclusters/backends/local/supervisor.py")
# `minicluster kube` (a Kubernetes on this machine) needs pyproject's optional `kube` dependencies (cryptography,
# dnspython), which the bundle leaves out: it never runs in a pod or the operator.
NOT_BUNDLED = ("miniclusters.localkube",)
# What every pod runs from the core copy: the broker and its modules, the `flux` CLI, the REST server (its app
# factory builds every router, the web pages included) and the burst service. None may need an extra.
POD_MODULES = (
    "broker.cli.flux",
    "broker.cli.commands",
    "broker.broker",
    "broker.modules.scheduler",
    "broker.modules.job_manager",
    "broker.modules.job_manager.manager",
    "broker.rest.server",
    "broker.rest.app",
    "broker.rest.web.cluster",
    "bursting.service",
    "miniclusters.cli",
)


def extras_dir() -> Path:
    return Path(sys.executable).resolve().parents[1] / "extras"


def needs_an_extra(error: ModuleNotFoundError) -> bool:
    """The module missing is one of the bundle's extras (left in the image, not copied into this pod)."""
    top = (error.name or "").split(".")[0]
    extras = Path("/opt/miniclusters/env/extras")
    return bool(top) and ((extras / top).exists() or (extras / f"{top}.py").exists())


def import_all(core: bool) -> tuple[int, list[str], list[str]]:
    """(modules imported, problems, modules left out because they need an extra)."""
    failed, skipped = [], []
    count = 0
    for module in module_names():
        parts = module.split(".")
        if "testing" in parts or parts[-1] == "__main__" or module.startswith(NOT_BUNDLED):
            continue  # test helpers need the dev extras; __main__ modules run a command when imported
        try:
            importlib.import_module(module)
            count += 1
        except ModuleNotFoundError as error:
            if core and needs_an_extra(error):
                skipped.append(f"{module} ({error.name})")
            else:
                failed.append(f"{module}: ModuleNotFoundError: {error}")
        except Exception as error:  # report every one, not just the first
            failed.append(f"{module}: {type(error).__name__}: {error}")
    return count, failed, skipped


def module_names() -> list[str]:
    """Every module of our packages, read from their files: pkgutil.walk_packages finds none in the bundle
    (PyInstaller's finder answers for its directory, and the spec drops the run-time hook that taught pkgutil to
    list through it), which once left this check importing nothing."""
    names = []
    for name in PACKAGES:
        root = Path(importlib.import_module(name).__file__).parent
        for path in sorted(root.rglob("*.py")):
            relative = path.relative_to(root.parent).with_suffix("")
            parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
            names.append(".".join(parts))
    return names


def main() -> int:
    core = "--core" in sys.argv[1:]
    if core and extras_dir().exists():
        print(f"check_bundle: --core on a copy with its extras ({extras_dir()})", file=sys.stderr)
        return 2
    count, failed, skipped = import_all(core)
    if count < 100:
        failed.append(f"only {count} modules found to import: is the walk over our packages broken?")
    failed += [f"{name} needs an extra, yet every pod runs it" for name in POD_MODULES if not _imported(name)]
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
    left = f", {len(skipped)} need the extras" if core else ""
    print(f"check_bundle: {count} modules import{left}{'' if not failed else f', {len(failed)} problems'}")
    if skipped:
        print("check_bundle: left to the extras: " + ", ".join(skipped))
    return 1 if failed else 0


def _imported(name: str) -> bool:
    return name in sys.modules


if __name__ == "__main__":
    sys.exit(main())
