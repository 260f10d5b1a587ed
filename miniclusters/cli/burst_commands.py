"""`minicluster burst`: burst by hand (the bursts section of `minicluster status` is burst_status.py)."""

from __future__ import annotations

import sys

import click

from miniclusters.backends.base import BackendError
from miniclusters.cli.backend_options import backend_errors, backend_options, open_backend

EXIT_INVALID = 2


@click.command()
@click.argument("name")
@backend_options
@click.option("--plugin", default="local", show_default=True, help="Burst plugin (miniclusters.burst_plugins).")
@click.option("--nodes", type=int, help="How many follower nodes to bring up.")
@click.option("--release", "release_name", help="Tear down this burst (as `status` names it) instead.")
def burst(
    name: str,
    backend: str,
    context: str | None,
    namespace: str | None,
    plugin: str,
    nodes: int | None,
    release_name: str | None,
) -> None:
    """Burst by hand: bring up NODES followers elsewhere that join NAME's lead as new ranks (past maxSize).

    \b
    Example:
      minicluster burst burst --plugin local --nodes 2
      minicluster burst burst --release burst-b1
    """
    from bursting import manual  # only when bursting: the other commands need not load it

    if release_name is None and (nodes is None or nodes < 1):
        click.echo("error: --nodes: give a number of nodes >= 1 (or --release BURST)", err=True)
        sys.exit(EXIT_INVALID)
    with backend_errors():
        opened = open_backend(backend, context, namespace)
        lead_context = getattr(opened, "lead_context", None)
        if lead_context is None:
            raise BackendError(
                f"burst by hand needs the lead's context, which the {opened.name} backend does not offer yet; "
                "its burst service (spec.flux.bursting.plugins) bursts on its own"
            )
        lead = lead_context(name)
        try:
            if release_name is not None:
                manual.release(name, lead, plugin, release_name)
                click.echo(f"released burst {release_name}")
                return
            assert nodes is not None
            joined = manual.burst(name, lead, plugin, nodes)
        except manual.UnknownPlugin as exc:
            click.echo(f"error: --plugin: {exc}", err=True)
            sys.exit(EXIT_INVALID)
        except manual.UnknownBurst as exc:
            click.echo(f"error: --release: {exc.args[0]}", err=True)
            sys.exit(EXIT_INVALID)
        except manual.BurstRefused as exc:  # the limit the burst service obeys too (spec.flux.bursting.plugins size)
            click.echo(f"error: --nodes {nodes}: {exc}", err=True)
            sys.exit(EXIT_INVALID)
        except manual.BurstError as exc:
            raise BackendError(str(exc)) from None
        hosts = ", ".join(joined.hosts)
        click.echo(f"burst {joined.name}: {nodes} node(s) via {plugin} joined as ranks {list(joined.ranks)} ({hosts})")


COMMANDS = (burst,)
