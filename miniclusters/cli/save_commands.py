"""`minicluster save`: the lead broker writes the queue archive that `minicluster up --restore` reads."""

from __future__ import annotations

import sys

import click

from miniclusters.cli.backend_options import backend_errors, backend_options, open_backend
from miniclusters.cli.queue_archive import (
    archive_path,
    print_saved,
    refuse_existing,
    refuse_missing_directory,
    save_argv,
)


@click.command()
@click.argument("name")
@click.argument("archive")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds jobs may take to settle.")
@click.option("--force", is_flag=True, help="Replace ARCHIVE if it exists.")
@backend_options
def save(
    name: str, archive: str, timeout: float, force: bool, backend: str, context: str | None, namespace: str | None
) -> None:
    """Stop the queue, settle running jobs by their save policy, write the queue archive ARCHIVE.

    Running jobs finish, are requeued, or checkpoint on their signal, as each declared at submit
    (`flux submit --setattr=save-policy=finish|requeue|checkpoint`, default requeue); jobs still running after
    --timeout are requeued. ARCHIVE is on this machine (local) or in the lead pod (kubernetes: on the volume
    of spec.archive.claimName).

    \b
    Example:
      minicluster save demo queue.tar.gz && minicluster down demo
      minicluster up examples/save-restore.yaml --restore queue.tar.gz
    """
    with backend_errors():
        target = open_backend(backend, context, namespace)
        path = archive_path(archive, target.ephemeral)
        refuse_existing(path, target.ephemeral, force)
        refuse_missing_directory(path, target.ephemeral)
        target.observe(name)  # NotFoundError: an unknown cluster is named before any queue stops
        click.echo(f"saving MiniCluster {name}'s queue: queue stopped, settling running jobs...", err=True)
        result = target.exec(name, 0, save_argv(name, path, timeout, force))
        if result.rc != 0:
            click.echo(result.stderr.strip() or f"flux queue save exited with {result.rc}", err=True)
            sys.exit(1)
        print_saved(name, result.stdout)
