"""Job commands over a lead broker's REST API (`--url`): jobs, submit, cancel, and `logs --url`."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from broker.rest.client import RestClient, RestError
from miniclusters.cli.arguments import command_words

URL_HELP = "The REST API of the lead broker, e.g. http://10.213.0.2:5000 (default $MINICLUSTER_URL)."


def _credentials(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        [
            click.option("--url", envvar="MINICLUSTER_URL", required=True, help=URL_HELP),
            click.option("--user", envvar="FLUX_USER", help="User name (default $FLUX_USER)."),
            click.option("--token", envvar="FLUX_TOKEN", help="Password/token (default $FLUX_TOKEN)."),
            click.option("--secret-key", envvar="FLUX_SECRET_KEY", help="Shared handshake secret ($FLUX_SECRET_KEY)."),
        ]
    ):
        func = option(func)
    return func


@contextmanager
def _client(url: str, user: str | None, token: str | None, secret_key: str | None) -> Iterator[RestClient]:
    client = RestClient(url, user=user or "", token=token or "", secret_key=secret_key or "")
    try:
        yield client
    except RestError as exc:
        click.echo(f"minicluster: {exc.message}" + (f" (HTTP {exc.status})" if exc.status else ""), err=True)
        sys.exit(1 if exc.status in (0, 404) or exc.status >= 500 else 2)
    finally:
        client.close()


def print_job_output(url: str, jobid: str, follow: bool) -> None:
    import os

    with _client(
        url, os.environ.get("FLUX_USER"), os.environ.get("FLUX_TOKEN"), os.environ.get("FLUX_SECRET_KEY")
    ) as c:
        lines = c.stream(jobid) if follow else (line.rstrip("\n") for line in c.output(jobid))
        for line in lines:
            click.echo(line)


@click.command()
@_credentials
@click.option("-a", "--all", "everything", is_flag=True, help="Include finished jobs (default: active only).")
def jobs(url: str, user: str | None, token: str | None, secret_key: str | None, everything: bool) -> None:
    """List jobs through the REST API (in multi-user mode, your own).

    \b
    Example:
      minicluster jobs --url http://10.213.0.2:5000 -a
    """
    with _client(url, user, token, secret_key) as client:
        rows = client.jobs()
    if not everything:
        rows = [r for r in rows if r.get("state") != "INACTIVE"]
    click.echo(f"{'JOBID':>14} {'STATE':>9} {'RESULT':>10} {'RC':>4} {'NODES':>5} {'RUNTIME':>8}  NAME")
    for row in rows:
        rc = "" if row.get("returncode") is None else str(row["returncode"])
        click.echo(
            f"{row['id']:>14} {row.get('state', ''):>9} {row.get('result', '') or '':>10} {rc:>4} "
            f"{row.get('nnodes', 0):>5} {row.get('runtime', 0.0):>8.2f}  {row.get('name', '')}"
        )


@click.command(context_settings={"ignore_unknown_options": True})
@_credentials
@click.option("-n", "--ntasks", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("-N", "--nodes", type=click.IntRange(min=1), help="Number of nodes.")
@click.option("-c", "--cores-per-task", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("-t", "--time-limit", type=click.IntRange(min=0), default=0, help="Seconds; 0 = none.")
@click.option("--cwd", help="Working directory of the job.")
@click.option("--env", "envars", multiple=True, help="NAME=VALUE for the job (repeatable).")
@click.option("--watch", is_flag=True, help="Print the job's output until it ends; exit with its code.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, callback=command_words)
def submit(
    url: str,
    user: str | None,
    token: str | None,
    secret_key: str | None,
    ntasks: int,
    nodes: int | None,
    cores_per_task: int,
    time_limit: int,
    cwd: str | None,
    envars: tuple[str, ...],
    watch: bool,
    command: tuple[str, ...],
) -> None:
    """Submit a job through the REST API and print its id.

    \b
    Example:
      minicluster submit --url http://10.213.0.2:5000 -N 2 -n 4 --watch -- mpi-hello
    """
    import shlex

    environment = {}
    for item in envars:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r}: expected NAME=VALUE", param_hint="--env")
        environment[key] = value
    with _client(url, user, token, secret_key) as client:
        jobid = client.submit(
            shlex.join(command),
            num_tasks=ntasks,
            num_nodes=nodes,
            cores_per_task=cores_per_task,
            runtime=time_limit or None,
            workdir=cwd,
            envars=environment or None,
        )
        click.echo(jobid)
        if watch:
            for line in client.stream(jobid):
                click.echo(line)
            returncode = client.job(jobid).get("returncode")
            sys.exit(returncode if isinstance(returncode, int) else 1)


@click.command()
@_credentials
@click.argument("jobid")
def cancel(url: str, user: str | None, token: str | None, secret_key: str | None, jobid: str) -> None:
    """Cancel a job through the REST API.

    \b
    Example:
      minicluster cancel --url http://10.213.0.2:5000 ƒ2Qr7MM9
    """
    with _client(url, user, token, secret_key) as client:
        click.echo(client.cancel(jobid))
