"""Jobs' FLUX_JOB_TMPDIRs on a rank: made before a job's tasks start, removed after, empty ones kept for the next.

Why: on this machine's ext4 (mounted with `discard`) a mkdir cost about 40 us of the broker's CPU and an rmdir
30 us and up to 0.3 ms of waiting, for every job, and handing each removal to the remover's thread cost the loop
context switches besides (issue 45). Most jobs leave their directory as they found it. So a finished job's
directory that is still empty, with the mode and owner it was made with, is renamed to a spare
(`jobtmp/.spare-N`), and the next job's directory is a spare renamed into place: two renames, no mkdir, no rmdir.
Anything else (a job that left files, a directory handed to another user, more than SPARES spares) goes to the
remover's thread as before (dir_remover.py), renamed first so that a later execution of the same job may make
its directory again at once. The spares are removed when the broker closes.

A job of the broker's own user could reach a spare as it can reach any of the broker's job directories, so
keeping one gives it nothing new; directories handed to another user are never kept.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable

from .dir_remover import DirRemover

SPARES = 16
"""Empty job directories kept for the next jobs (as many jobs as a rank runs at once need, at most)."""


def make_job_dir(path: str) -> None:
    """A new directory: one mkdir (its parent is there after the first job), not makedirs' checks."""
    try:
        os.mkdir(path)
    except FileNotFoundError:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:
        pass


class JobDirs:
    """`make(path)` before a job starts, `release(path, gen, keep)` after; `close()` when the broker goes."""

    def __init__(self, jobtmp: str, remove: Callable[[str], None], spares: int = SPARES) -> None:
        self._jobtmp = jobtmp
        self._remover = DirRemover(remove)
        self._most = spares
        self._spares: list[str] = []
        self._made: tuple[int, int, int] | None = None  # (mode, uid, gid) of a directory as mkdir makes it
        self._count = 0

    def make(self, path: str) -> None:
        while self._spares:
            spare = self._spares.pop()
            try:
                os.rename(spare, path)
                return
            except OSError:  # taken from under us, or `path` is there and not empty: make it as before
                with contextlib.suppress(OSError):
                    os.rmdir(spare)
                break
        make_job_dir(path)
        if self._made is None:
            with contextlib.suppress(OSError):
                made = os.lstat(path)
                self._made = (stat.S_IMODE(made.st_mode), made.st_uid, made.st_gid)

    def release(self, path: str, gen: int, keep: bool = True) -> None:
        """The job is over on this rank: its directory becomes a spare (`keep` and as it was made) or goes."""
        if keep and len(self._spares) < self._most and self._pristine(path):
            self._count += 1
            spare = os.path.join(self._jobtmp, f".spare-{self._count}")
            try:
                os.rename(path, spare)
                self._spares.append(spare)
                return
            except OSError:
                pass
        doomed = f"{path}.gone-{gen}"
        try:
            os.rename(path, doomed)
        except FileNotFoundError:
            return
        except OSError:
            doomed = path
        self._remover.remove(doomed)

    def _pristine(self, path: str) -> bool:
        """Empty, with the mode and owner a new directory gets here."""
        try:
            found = os.lstat(path)
            if not stat.S_ISDIR(found.st_mode):
                return False
            if (stat.S_IMODE(found.st_mode), found.st_uid, found.st_gid) != self._made:
                return False
            with os.scandir(path) as entries:
                return next(entries, None) is None
        except OSError:
            return False

    def spares(self) -> list[str]:
        return list(self._spares)

    def close(self) -> None:
        """The spares removed, and everything handed to the remover gone (it waits for that)."""
        for spare in self._spares:
            with contextlib.suppress(OSError):
                os.rmdir(spare)
        self._spares.clear()
        self._remover.close()
