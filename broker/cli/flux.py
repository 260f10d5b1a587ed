"""`flux` entry point: `start`/`broker` and the job commands take lean paths (no click) so they start fast."""

from __future__ import annotations

import sys

JOB_COMMANDS = ("submit", "run", "bulksubmit", "batch", "alloc", "jobs", "job", "cancel", "queue", "proxy")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] in ("start", "broker"):
        from .start import main_broker, main_start

        sys.exit(main_start(args[1:]) if args[0] == "start" else main_broker(args[1:]))
    if args and args[0] in JOB_COMMANDS:
        from .jobcli import main as job_main

        sys.exit(job_main(args[0], args[1:]))
    if args and args[0] == "exec":
        from .exec import main as exec_main

        sys.exit(exec_main(args[1:]))
    if args[:2] == ["restful", "serve"]:
        from ..rest.server import main as serve

        sys.exit(serve(args[2:]))
    from .commands import cli

    cli.main(args=args, prog_name="flux")


if __name__ == "__main__":
    main()
