"""Manage the REST API's users from inside the lead pod, editing the server's user database directly.

    python3 -m broker.rest.users_admin add NAME [--superuser] [--password-stdin | --password-file FILE]
    python3 -m broker.rest.users_admin list [--json]
    python3 -m broker.rest.users_admin remove NAME
    python3 -m broker.rest.users_admin passwd NAME [--password-stdin | --password-file FILE]

For the `flux` flavour, whose `flux` is flux-core's (the built-in flavour's `flux restful users ...` is the same
tool). The running server sees each change on its next request: a removed user's tokens stop working at once.
The database is found from --state-dir, else $FLUX_RESTFUL_STATE_DIR, else from $FLUX_URI (which `minicluster
exec` sets): `<run>/state/restful` as a rendered lead pod keeps it, then `<rundir>/restful`, the server's default.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from broker.errors import BrokerBaseError
from broker.rest.users import UserError, UserStore, check_name, check_password

PROG = "python3 -m broker.rest.users_admin"
DATABASE = "users.db"


class AdminError(BrokerBaseError):
    """Ends the command with a message and an exit code (2: invalid input, 1: the operation failed)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def database_path(state_dir: str | None, env: Mapping[str, str]) -> tuple[Path, bool]:
    """(the database, whether it may be created): an explicit directory may be new, a guessed one must exist."""
    explicit = state_dir or env.get("FLUX_RESTFUL_STATE_DIR")
    if explicit:
        return Path(explicit) / DATABASE, True
    uri = env.get("FLUX_URI", "")
    if not uri.startswith("local://"):
        raise AdminError("no user database given: pass --state-dir, or run inside the lead pod ($FLUX_URI)")
    rundir = Path(uri.removeprefix("local://")).parent
    candidates = [rundir.parent / "state" / "restful" / DATABASE, rundir / "restful" / DATABASE]
    for candidate in candidates:
        if candidate.exists():
            return candidate, False
    raise AdminError(
        f"no user database at {' or '.join(map(str, candidates))}: is the REST API enabled "
        "(spec.restful.enabled)? Pass --state-dir to name it"
    )


def read_password(from_stdin: bool, name: str, path: str | None = None) -> str:
    """From a file's first line (e.g. a mounted Secret), stdin's, or asked twice without echo; never from the
    command line."""
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                password = handle.readline().rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise AdminError(f"--password-file {path}: cannot read it ({exc})") from None
    elif from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif not sys.stdin.isatty():
        raise AdminError("no terminal to ask for the password on: use --password-stdin or --password-file")
    else:
        password = getpass.getpass(f"Password for {name}: ")
        if getpass.getpass("Repeat it: ") != password:
            raise AdminError("password: the two entries differ; nothing was changed")
    try:
        check_password(password)
    except UserError as exc:
        raise AdminError(str(exc)) from None
    return password


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-dir", help="the REST server's state directory (holds users.db)")
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="add a user", parents=[common])
    add.add_argument("name")
    add.add_argument("--superuser", action="store_true", help="may manage users and sees every job")
    add.add_argument("--password-stdin", action="store_true", help="read the password from stdin's first line")
    add.add_argument("--password-file", help="read the password from this file's first line")
    listing = commands.add_parser("list", help="list users", parents=[common])
    listing.add_argument("--json", action="store_true", help="print JSON, as GET /v1/users answers")
    remove = commands.add_parser("remove", help="remove a user; their tokens stop working", parents=[common])
    remove.add_argument("name")
    passwd = commands.add_parser(
        "passwd", help="set a new password; tokens issued before stop working", parents=[common]
    )
    passwd.add_argument("name")
    passwd.add_argument("--password-stdin", action="store_true", help="read the password from stdin's first line")
    passwd.add_argument("--password-file", help="read the password from this file's first line")
    return parser


def run(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    """Do the command; returns what to print."""
    if getattr(args, "name", None) is not None:
        try:
            check_name(args.name)
        except UserError as exc:
            raise AdminError(str(exc)) from None
    path, may_create = database_path(args.state_dir, env)
    if not may_create and not path.exists():
        raise AdminError(f"no user database at {path}")
    password = ""
    if args.command in ("add", "passwd"):  # read before opening: a refused password leaves no new database
        password = read_password(args.password_stdin, args.name, args.password_file)
    store = UserStore(path)
    try:
        if args.command == "add":
            store.add(args.name, password, superuser=args.superuser)
            return f"added user {args.name}" + (" (superuser)" if args.superuser else "")
        if args.command == "passwd":
            store.set_password(args.name, password)
            return f"changed the password of {args.name}; tokens issued before no longer work"
        if args.command == "remove":
            store.remove(args.name)
            note = (
                " (FLUX_USER: the server recreates it at its next start)" if args.name == env.get("FLUX_USER") else ""
            )
            return f"removed user {args.name}; their tokens no longer work{note}"
        users = [{"name": p.name, "superuser": p.is_superuser} for p in store.principals()]
        if args.json:
            return json.dumps({"users": users}, indent=2)
        width = max([4, *(len(u["name"]) for u in users)])  # type: ignore[arg-type]
        rows = [f"{'NAME':<{width}}  SUPERUSER"]
        rows += [f"{u['name']:<{width}}  {'yes' if u['superuser'] else 'no'}" for u in users]
        return "\n".join(rows)
    except UserError as exc:
        raise AdminError(str(exc), 2 if exc.reason in ("invalid", "exists") else 1) from None
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # argparse exits 2 on a bad command line
    try:
        print(run(args, os.environ))
    except AdminError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exc.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
