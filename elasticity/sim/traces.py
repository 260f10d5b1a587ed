"""Where the shared workload traces live: ``$MINICLUSTER_TRACES``, else ``../shared/traces`` beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

ENV = "MINICLUSTER_TRACES"
TRACES = {
    "sdsc": "SDSC-SP2-1998-4.2-cln.first5k.swf",
    "hpc2n": "HPC2N-2002-2.2-cln.subset.swf",
    "nasa": "NASA-iPSC-1993-3.1-cln.swf",
    "lublin": "lublin_256.swf",
}


def traces_dir() -> Path:
    configured = os.environ.get(ENV)
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2].parent / "shared" / "traces"


def trace_path(key: str) -> Path:
    """The path of a shared trace by short name (sdsc, hpc2n, nasa, lublin); FileNotFoundError says where."""
    path = traces_dir() / TRACES[key]
    if not path.is_file():
        raise FileNotFoundError(f"trace {path} not found (set {ENV} to the directory holding the .swf traces)")
    return path
