"""A run directory made as tempfile.mkdtemp makes one, without tempfile.

Why (issue 45, an idle broker's memory): tempfile imports random (for its names) and shutil (with zlib, bz2 and
lzma), about 0.7 MB of an idle broker's resident memory here, and a broker (or `flux start --test-size`, before it
forks its brokers) needs only one directory name.
"""

from __future__ import annotations

import os

TEMP_VARIABLES = ("TMPDIR", "TEMP", "TMP")
TEMP_DIRS = ("/tmp", "/var/tmp", "/usr/tmp")


def temp_dir() -> str:
    """tempfile.gettempdir()'s choice: the first of $TMPDIR, $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp, the current
    directory, that is a directory this process can write to."""
    candidates = [os.environ[name] for name in TEMP_VARIABLES if os.environ.get(name)]
    for candidate in [*candidates, *TEMP_DIRS, os.getcwd()]:
        if os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    raise FileNotFoundError(f"no usable temporary directory among {[*candidates, *TEMP_DIRS]}")


def make_rundir(prefix: str = "flux-") -> str:
    """A new directory only this user can enter, as tempfile.mkdtemp(prefix=prefix) makes."""
    base = temp_dir()
    while True:
        path = os.path.join(base, f"{prefix}{os.urandom(6).hex()}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return os.path.abspath(path)
