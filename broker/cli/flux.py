"""`flux` entry point: `start`/`broker` take a lean path (no click) so broker processes stay small and fast."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] in ("start", "broker"):
        from .start import main_broker, main_start

        sys.exit(main_start(args[1:]) if args[0] == "start" else main_broker(args[1:]))
    from .commands import cli

    cli.main(args=args, prog_name="flux")


if __name__ == "__main__":
    main()
