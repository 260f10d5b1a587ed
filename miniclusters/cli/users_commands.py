"""`minicluster users add|list|passwd|remove`: the REST API's users, through the lead's /v1/users (superuser only,
but for changing one's own password).

The caller's credentials come as for every REST verb (--url or $MINICLUSTER_URL, $FLUX_USER/$FLUX_TOKEN). A new
user's password is read from a prompt that does not echo (asked twice) or, for scripts, the first line of
standard input (--password-stdin): never from the command line, where `ps` and shell history would show it.
"""

from __future__ import annotations

import json
import sys

import click

from broker.rest.users import UserError, check_name, check_password
from miniclusters.cli.rest_commands import _client, _credentials

SINGLE_USER_NOTE = (
    "note: this server runs in single-user mode, where every user sees every job; "
    "set spec.restful.mode: multi-user to keep users' jobs apart"
)


def _name(name: str) -> str:
    try:
        return check_name(name)
    except UserError as exc:
        raise click.BadParameter(str(exc).removeprefix("name: ").removeprefix("name "), param_hint="NAME") from None


def _read_password(from_stdin: bool, name: str) -> str:
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
        hint = "--password-stdin"
    else:
        if not sys.stdin.isatty():
            raise click.UsageError("no terminal to ask for the password on: pipe it in with --password-stdin")
        password = click.prompt(f"Password for {name}", hide_input=True, confirmation_prompt=True, err=True)
        hint = "password"
    try:
        check_password(password)
    except UserError as exc:
        raise click.BadParameter(str(exc).removeprefix("password: "), param_hint=hint) from None
    return password


@click.group()
def users() -> None:
    """Manage the users of a MiniCluster's REST API (superuser only, but for your own password).

    \b
    Example:
      printf '%s\\n' "$ALICE_PASSWORD" | minicluster users add alice --password-stdin
      minicluster users list
      minicluster users remove alice
    """


@users.command("add")
@_credentials
@click.argument("name")
@click.option("--superuser", is_flag=True, help="The new user may manage users and sees every job.")
@click.option("--password-stdin", is_flag=True, help="Read the new user's password from the first line of stdin.")
def add(
    url: str,
    user: str | None,
    token: str | None,
    secret_key: str | None,
    name: str,
    superuser: bool,
    password_stdin: bool,
) -> None:
    """Add a user NAME (the password is asked for without echo, twice).

    \b
    Example:
      minicluster users add alice                 # prompts for alice's password
      minicluster users add bob --superuser --password-stdin < bob.password
    """
    _name(name)
    password = _read_password(password_stdin, name)
    with _client(url, user, token, secret_key) as client:
        answer = client.add_user(name, password, superuser=superuser)
    click.echo(f"added user {name}" + (" (superuser)" if superuser else ""))
    if answer.get("mode") == "single-user":
        click.echo(SINGLE_USER_NOTE, err=True)


@users.command("list")
@_credentials
@click.option("--json", "as_json", is_flag=True, help="Print the server's JSON answer.")
def list_users(url: str, user: str | None, token: str | None, secret_key: str | None, as_json: bool) -> None:
    """List the users (never their passwords).

    \b
    Example:
      minicluster users list --json
    """
    with _client(url, user, token, secret_key) as client:
        answer = client.users()
    if as_json:
        click.echo(json.dumps(answer, indent=2))
        return
    rows = answer.get("users", [])
    width = max([4, *(len(str(row["name"])) for row in rows)])
    click.echo(f"{'NAME':<{width}}  SUPERUSER")
    for row in rows:
        click.echo(f"{row['name']:<{width}}  {'yes' if row.get('superuser') else 'no'}")
    if answer.get("mode") == "single-user":
        click.echo(SINGLE_USER_NOTE, err=True)


@users.command("passwd")
@_credentials
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the new password from the first line of stdin.")
def passwd(
    url: str, user: str | None, token: str | None, secret_key: str | None, name: str, password_stdin: bool
) -> None:
    """Set NAME's password (your own, or anyone's as a superuser); tokens issued before stop working.

    \b
    Example:
      minicluster users passwd alice              # prompts twice, no echo
    """
    _name(name)
    password = _read_password(password_stdin, name)
    with _client(url, user, token, secret_key) as client:
        client.set_password(name, password)
    click.echo(f"changed the password of {name}; tokens issued before no longer work")


@users.command("remove")
@_credentials
@click.argument("name")
def remove(url: str, user: str | None, token: str | None, secret_key: str | None, name: str) -> None:
    """Remove user NAME; tokens already issued to them stop working at once.

    \b
    Example:
      minicluster users remove alice
    """
    _name(name)
    with _client(url, user, token, secret_key) as client:
        client.remove_user(name)
    click.echo(f"removed user {name}")
