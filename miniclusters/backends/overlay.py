"""Reading the lead broker's `flux overlay status` answer: which ranks have joined (every backend asks it).

Our built-in `flux` offers `overlay status --json` (machine-readable: ranks[].state is up/down/lost). Real Flux
(the `flux` flavour) has no JSON form, so its tree text ('RANK HOST: full|partial|degraded|lost|offline') is
parsed; both flavours print the same tree, so the text parser is the fallback for either.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from miniclusters.backends.base import BackendError, ExecResult
from miniclusters.render.layout import LOCAL_SOCKETS

_TREE_LINE = re.compile(r"^[\s│├└─]*(\d+)\s+(\S+):\s+(\w+)")


def parse_overlay(stdout: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(ranks up, ranks down) from `flux overlay status --json` or its text tree."""
    text = stdout.strip()
    if text.startswith("{"):
        data = json.loads(text)
        up = tuple(sorted(int(r["rank"]) for r in data.get("ranks", []) if r.get("state") == "up"))
        down = tuple(sorted(int(r["rank"]) for r in data.get("ranks", []) if r.get("state") != "up"))
        return up, down
    up_list: list[int] = []
    down_list: list[int] = []
    for line in text.splitlines():
        match = _TREE_LINE.match(line)
        if not match:
            continue
        rank, status = int(match.group(1)), match.group(3)
        (down_list if status in ("offline", "lost") else up_list).append(rank)
    if not up_list and not down_list:
        raise ValueError(f"cannot read `flux overlay status` output: {text[:120]!r}")
    return tuple(sorted(up_list)), tuple(sorted(down_list))


Ranks = tuple[tuple[int, ...], tuple[int, ...]]


def overlay_ranks(result: ExecResult) -> Ranks:
    """(ranks up, ranks down) from the lead's answer to `flux overlay status`; a BackendError saying why not."""
    if result.rc != 0:
        raise BackendError(f"`flux overlay status` in the lead pod exited {result.rc}: {result.stderr.strip()}")
    try:
        return parse_overlay(result.stdout)
    except (ValueError, KeyError) as exc:
        raise BackendError(f"unexpected `flux overlay status` output: {exc}") from None


def lead_ranks(
    running: bool, finished: bool, ask: Callable[[], Ranks]
) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None, str | None]:
    """(ranks up, ranks down, lead error) for a status: asked of a running lead; a lead that cannot answer, or
    one not running yet in a cluster that has not finished, is the error (the ranks then unknown)."""
    if running:
        try:
            up, down = ask()
        except BackendError as exc:
            return None, None, str(exc)
        return up, down, None
    return None, None, None if finished else "the lead pod (index 0) is not running yet"


def with_lead_socket(rundir: str, argv: list[str]) -> list[str]:
    """argv run with FLUX_URI at whichever local socket the broker in `rundir` opened (exit 69 if none yet):
    `local-0` under flux-core 0.88, `local` under the built-in broker."""
    candidates = " ".join(f'"$0/{name}"' for name in LOCAL_SOCKETS)
    script = (
        f'for s in {candidates}; do if [ -S "$s" ]; then export FLUX_URI="local://$s"; exec "$@"; fi; done; '
        f'echo "no broker socket in $0 (looked for {", ".join(LOCAL_SOCKETS)})" >&2; exit 69'
    )
    return ["sh", "-c", script, rundir, *argv]


def overlay_argv(flavour: str, flux: str = "flux") -> list[str]:
    """`flux overlay status` in the form the flavour's CLI has (real Flux has no --json)."""
    return [flux, "overlay", "status", "--json"] if flavour == "builtin" else [flux, "overlay", "status"]
