"""`flux` entry point: `start`/`broker` and the job commands take lean paths (no click) so they start fast."""

from __future__ import annotations

import sys

JOB_COMMANDS = ("submit", "run", "bulksubmit", "batch", "alloc", "jobs", "job", "cancel", "queue", "proxy")
SIGPIPE_EXIT = 141  # 128 + SIGPIPE: what a shell reports for a C tool cut off by `| head`
QUICK_EXIT_COMMANDS = ("submit", "run")
"""Commands that end with os._exit once their output is flushed: the interpreter's teardown of the modules they
loaded cost `flux run true` 2 ms of CPU here (issue 45), and they leave nothing for it to do."""
OWN_COMMANDS = {
    "start": "start an instance (--test-size=N, or one broker of a configured instance) and run a command in it",
    "broker": "run one broker of a configured instance",
    "restful serve": "serve the Flux RESTful API v1 for the instance at $FLUX_URI",
    "restful users": "add, list or remove the REST API's users (add NAME, list, remove NAME, passwd NAME)",
    "exec": "run a command on brokers of the instance (-r IDSET, -l)",
}


def _help() -> int:
    """Every command: the lean ones, the click ones and the server (before, `flux --help` showed only click's)."""
    from .commands import cli
    from .jobcli import SUMMARIES

    rows = dict(OWN_COMMANDS)
    rows.update(SUMMARIES)
    for name, command in cli.commands.items():
        rows[name] = command.get_short_help_str(limit=80)
    print(
        "Usage: flux COMMAND [ARGS]...\n\n  Talk to the Flux instance at $FLUX_URI (COMMAND --help for its options).\n"
    )
    print("Commands:")
    width = max(map(len, rows))
    for name in sorted(rows):
        print(f"  {name:<{width}}  {rows[name]}")
    return 0


def _dispatch(args: list[str]) -> int | str | None:
    if not args or args[0] in ("-h", "--help", "help"):
        return _help()
    if args[0] in ("-V", "--version"):  # flux-core's spelling of `flux version`
        args = ["version", *args[1:]]
    if args[0] in ("start", "broker"):
        from ..lazy_stdlib import defer

        defer()  # before anything imports dataclasses: see broker/lazy_stdlib.py
        from .start import main_broker, main_start

        return main_start(args[1:]) if args[0] == "start" else main_broker(args[1:])
    if args[0] in JOB_COMMANDS:
        from .jobcli import main as job_main

        return job_main(args[0], args[1:])
    if args[0] == "exec":
        from .exec import main as exec_main

        return exec_main(args[1:])
    if args[:2] == ["restful", "serve"]:
        from ..rest.server import main as serve

        return serve(args[2:])
    if args[:2] == ["restful", "users"]:
        from ..rest.users_admin import main as users_admin

        return users_admin(args[2:])
    from .commands import cli

    cli.main(args=args, prog_name="flux")
    return 0


def main(argv: list[str] | None = None) -> None:
    """Run one command; a reader that went away (`flux jobs | head`) ends it quietly, for every command."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        try:
            code = _dispatch(args)
        except SystemExit as exit_:
            code = exit_.code
        sys.stdout.flush()  # here, not at interpreter exit, where a broken pipe prints "Exception ignored"
    except BrokenPipeError:
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the final flush at exit must not fail again
        code = SIGPIPE_EXIT
    if args[:1] and args[0] in QUICK_EXIT_COMMANDS:
        _quick_exit(code)
    sys.exit(code)


def _quick_exit(code: object) -> None:
    """os._exit(code) when nothing is left for the interpreter's exit to do (no atexit handler, no other thread,
    an integer code); returns otherwise, for sys.exit to end the process the usual way."""
    import atexit
    import os

    if not (code is None or isinstance(code, int)) or atexit._ncallbacks():
        return
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return  # sys.exit reports it as it always has
    os._exit(code or 0)


if __name__ == "__main__":
    main()
