"""Machine-wide claims on network slots (a /24, a bridge `mcbr<slot>`, veths `mcv<slot>x<i>`).

A slot's kernel objects are named by the slot alone, so two local clusters must never hold one slot: a cluster
starting on a slot still in use would reuse the other's bridge and, clearing "leftovers" of its own name, delete
the other's veths (its pods lose eth0 mid-run), and whichever goes down first would delete the shared bridge.
Clusters live in different state directories (one per user, test or `MINICLUSTERS_STATE_DIR`), so the per-store
lock cannot see each other's slots; routes alone leave a window between choosing a slot and adding its bridge.
Claims are files in one directory per machine, made under a lock: `<slot>` holds the owning cluster directory.
A claim is stale when its owner's state file is gone or records another slot (a crash or an interrupted `up`),
after a grace period that covers a `create` between its claim and its first saved record.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from miniclusters import lockfile
from miniclusters.backends.local.state import STATE_FILE

CLAIM_GRACE_S = 300.0
"""A claim younger than this is live even before its owner has saved a record (pods are being prepared)."""


def claims_dir() -> Path:
    """/run/miniclusters/slots as root (tmpfs: claims die with the machine's network objects), else per user."""
    if os.geteuid() == 0:
        return Path("/run/miniclusters/slots")
    return Path(os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/miniclusters-{os.getuid()}") / "miniclusters-slots"


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """The claims' lock; the last holder out with no claim left removes it and the directory (`down` leaves no
    lock file and no empty directory of ours behind)."""
    path = directory / ".lock"
    with lockfile.locked(path, dir_mode=0o700):
        try:
            yield
        finally:
            if not any(p.name.isdigit() for p in directory.iterdir()):
                lockfile.remove_held(path)
                with contextlib.suppress(OSError):
                    directory.rmdir()
                    if directory.parent.name.startswith("miniclusters"):  # ours, not $XDG_RUNTIME_DIR itself
                        directory.parent.rmdir()


def _owner_holds(owner: Path, slot: int) -> bool:
    try:
        return int(json.loads((owner / STATE_FILE).read_text()).get("slot", -1)) == slot
    except (OSError, ValueError, TypeError, AttributeError):
        return False


def live_claims(directory: Path | None = None, now: float | None = None) -> dict[int, Path]:
    """slot -> owning cluster directory, for every claim that is not stale."""
    directory = directory or claims_dir()
    now = time.time() if now is None else now
    out: dict[int, Path] = {}
    if not directory.is_dir():
        return out
    for path in directory.iterdir():
        if not path.name.isdigit():
            continue
        try:
            owner = Path(path.read_text().strip())
            age = now - path.stat().st_mtime
        except OSError:
            continue
        if age < CLAIM_GRACE_S or _owner_holds(owner, int(path.name)):
            out[int(path.name)] = owner
    return out


def claim(owner: Path, choose: Callable[[set[int]], int], directory: Path | None = None) -> int:
    """Claim the slot `choose(busy slots)` returns, atomically with respect to every other claimant.

    `choose` raises when nothing is free; a slot this owner already holds counts as free for it.
    """
    directory = directory or claims_dir()
    with _locked(directory):
        held = live_claims(directory)
        busy = {slot for slot, holder in held.items() if holder != owner}
        slot = choose(busy)
        (directory / str(slot)).write_text(f"{owner}\n")
        return slot


def release(owner: Path, directory: Path | None = None) -> None:
    """Drop this owner's claims (another owner's are left alone)."""
    directory = directory or claims_dir()
    if not directory.is_dir():
        return
    with _locked(directory):
        for path in directory.iterdir():
            with contextlib.suppress(OSError):
                if path.name.isdigit() and Path(path.read_text().strip()) == owner:
                    path.unlink()


def held_by_other(owner: Path, slot: int, directory: Path | None = None) -> bool:
    """Whether another cluster holds `slot` now: its bridge and veths are not ours to delete."""
    holder = live_claims(directory).get(slot)
    return holder is not None and holder != owner
