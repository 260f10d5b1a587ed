"""Copy the bundle's extras (bundle_parts.py: numpy, the plotting stack, the Kubernetes client and what only they
require) from the build's virtualenv into DEST, as a plain site directory the bundle puts on its sys.path.

    /build/venv/bin/python extras.py REQUIREMENTS DEST
"""

from __future__ import annotations

import shutil
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from bundle_parts import split

SKIPPED_PARTS = {"tests", "__pycache__"}
"""Test suites are never imported; byte code is compiled afresh for this interpreter (compileall) after the copy."""


def main(requirements: str, dest: str) -> int:
    with open(requirements) as lines:
        _, extras = split(lines)
    target = Path(dest)
    copied = 0
    installed = []
    for name in sorted(extras):
        try:
            dist = distribution(name)
        except PackageNotFoundError:  # required only under another Python (a marker the closure ignores)
            continue
        installed.append(name)
        for file in dist.files or []:
            source = Path(str(dist.locate_file(file)))
            parts = Path(str(file)).parts
            if parts[0] == ".." or SKIPPED_PARTS & set(parts[:-1]) or not source.is_file():
                continue  # console scripts live outside site-packages; tests and byte code are not wanted
            out = target / file
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, out)
            copied += 1
    print(f"extras: {len(installed)} distributions, {copied} files in {dest}: {', '.join(installed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
