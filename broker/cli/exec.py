"""`flux exec`: run a command on brokers of the instance, as flux-core's `flux exec` does.

Each target broker runs `/bin/sh -c COMMAND` through its job-exec.rsh service (the same path the Open MPI launch
agent takes), with FLUX_URI pointing at that broker; the output comes back with the exit status. All requests go out
at once, so the ranks run concurrently. Exit code: the largest of the ranks' (128+N for a signal N), as flux-core's.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
from typing import Any

from common import idset

from ..client import FluxError, Handle

USAGE = "flux exec [-r IDSET] [-x IDSET] [-d DIR] [-l] [-n] [-v] COMMAND..."


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flux exec", usage=USAGE, description=__doc__)
    parser.add_argument("-r", "--rank", default="all", help="target ranks (IDSET or 'all'; default all)")
    parser.add_argument("-x", "--exclude", default="", help="ranks to leave out (IDSET)")
    parser.add_argument("-d", "--dir", help="working directory of the command (default: the current one)")
    parser.add_argument("-l", "--label-io", action="store_true", help="prefix each output line with 'RANK: '")
    parser.add_argument("-n", "--noinput", action="store_true", help="stdin is /dev/null (always the case here)")
    parser.add_argument("-v", "--verbose", action="store_true", help="say where each command runs")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    return parser


def _ranks(text: str, size: int, what: str) -> list[int]:
    if text == "all":
        return list(range(size))
    try:
        ranks = idset.decode(text)
    except ValueError:
        raise SystemExit(f"flux-exec: --{what}={text!r}: expected an idset such as 0-3,5 or 'all'") from None
    bad = [r for r in ranks if r >= size]
    if bad:
        raise SystemExit(f"flux-exec: One or more invalid --{what}s specified: {idset.encode(bad)}")
    return ranks


def exit_code(status: int) -> tuple[int, str]:
    """A wait(2) status as a shell reports it (signal N: 128+N), and as flux-core's `flux exec` names it."""
    signum = status & 0x7F
    if signum:
        return 128 + signum, signal.strsignal(signum) or f"Signal {signum}"
    code = (status >> 8) & 0xFF
    return code, f"Exit {code}"


def exit_sets(codes: dict[int, tuple[int, str]]) -> list[str]:
    """'[1-2]: Exit 3' lines for the ranks that failed, grouped by outcome (brackets only around several)."""
    groups: dict[str, list[int]] = {}
    for rank, (code, name) in sorted(codes.items()):
        if code:
            groups.setdefault(name, []).append(rank)
    return [
        f"{'[' + idset.encode(ranks) + ']' if len(ranks) > 1 else ranks[0]}: {name}" for name, ranks in groups.items()
    ]


def _emit(rank: int, output: list[list[Any]], label: bool) -> None:
    texts: dict[str, str] = {"stdout": "", "stderr": ""}
    for stream, _task, text in output:
        texts[stream] = texts.get(stream, "") + text
    for stream, text in texts.items():
        target = sys.stdout if stream == "stdout" else sys.stderr
        if label:
            text = "".join(f"{rank}: {line}" for line in text.splitlines(keepends=True))
        target.write(text)
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        print(f"flux-exec: a command is required\nusage: {USAGE}", file=sys.stderr)
        return 2
    shown = shlex.join(args.command)
    command = f"exec {shown}"  # the command itself, not a shell, is what exits or is killed
    env = {k: v for k, v in os.environ.items() if k != "FLUX_URI"}
    env["PWD"] = os.path.abspath(args.dir) if args.dir else os.getcwd()
    try:
        with Handle() as handle:
            size = int(handle.getattr("size"))
            ranks = [r for r in _ranks(args.rank, size, "rank") if r not in set(_ranks(args.exclude, size, "exclude"))]
            status = handle.rpc("overlay.status", nodeid=0, timeout=10)
            down = [e["rank"] for e in status["ranks"] if e["rank"] in ranks and e["state"] != "up"]
            if down:
                print(f"flux-exec: Error: rank {idset.encode(down)} is not online", file=sys.stderr)
                return 1
            tags = {}
            for rank in ranks:
                if args.verbose:
                    print(f"flux-exec: rank {rank}: {shown}", file=sys.stderr)
                payload = {"id": 0, "command": command, "env": env}
                tags[rank] = handle.send_request("job-exec.rsh", payload, rank)
            codes = {}
            for rank, tag in tags.items():
                reply = handle.wait(tag, None)
                _emit(rank, reply.get("output", []), args.label_io)
                codes[rank] = exit_code(int(reply.get("status", 0)))
    except FluxError as exc:
        print(f"flux-exec: {exc}", file=sys.stderr)
        return 1
    for line in exit_sets(codes):
        print(line, file=sys.stderr)
    return max((code for code, _ in codes.values()), default=0)
