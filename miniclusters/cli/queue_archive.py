"""What `minicluster save` and `minicluster up --restore` add to a cluster command: the lead's `flux queue save`
call, and the spec that restores an archive, checked here first whenever this machine can read it (a damaged or
foreign archive exits 2 before anything is created). The archive itself is broker/jobs/archive.py."""

from __future__ import annotations

import json
import os
from typing import Any, TypedDict

import click

from broker.jobs.archive import read_archive, summary
from broker.jobs.archive_members import ArchiveError
from miniclusters.api.spec import MiniCluster
from miniclusters.errors import MiniclustersError

EXIT_INVALID = 2
UNFIT_CHOICES = ("wait", "reject")


class RestoreRefused(MiniclustersError, click.ClickException):
    exit_code = EXIT_INVALID

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.message}", err=True)


class ArchiveUpdate(TypedDict, total=False):
    """What --restore changes in spec.archive."""

    path: str
    unfit: str


def archive_path(path: str, ephemeral: bool) -> str:
    """Local clusters share this machine's filesystem; elsewhere the path is the lead pod's own."""
    if ephemeral:
        return os.path.abspath(path)
    if not path.startswith("/"):
        raise RestoreRefused(f"ARCHIVE: {path!r}: give the absolute path inside the lead pod (spec.archive's volume)")
    return path


def refuse_existing(path: str, ephemeral: bool, force: bool) -> None:
    """Locally this machine sees the file: refuse here (exit 2); elsewhere the lead broker refuses it."""
    if ephemeral and not force and os.path.exists(path):
        raise RestoreRefused(f"ARCHIVE: {path} exists: choose another path, or replace it with --force")


def refuse_missing_directory(path: str, ephemeral: bool) -> None:
    """A save writes into a directory that exists (it creates none): locally refused here, exit 2; elsewhere the
    lead broker refuses it."""
    directory = os.path.dirname(path) or "."
    if ephemeral and not os.path.isdir(directory):
        raise RestoreRefused(f"ARCHIVE: {path}: directory {directory} does not exist: create it first")


def refuse_restore_into_existing(name: str, exists: bool) -> None:
    """A queue is restored into a new cluster only (one id space, one journal): said before the archive is read."""
    if exists:
        raise RestoreRefused(
            f"--restore: MiniCluster {name!r} already exists: a queue is restored into a new cluster only; "
            f"remove it first with `minicluster down {name}`, or choose another metadata.name"
        )


def save_argv(name: str, path: str, timeout: float, force: bool) -> list[str]:
    return ["flux", "queue", "save", f"--cluster={name}", f"--timeout={timeout:g}s", *(["--force"] * force), path]


def print_saved(name: str, stdout: str) -> None:
    try:
        saved = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        click.echo(stdout, nl=False)
        return
    click.echo(
        f"saved MiniCluster {name}'s queue to {saved['path']}: {saved['jobs']} jobs "
        f"({saved['pending']} to run after the restore, {saved['requeued']} of them requeued by the save, "
        f"{saved['inactive']} done)"
    )
    click.echo(f"next: minicluster down {name}; minicluster up SPEC --restore {saved['path']}")


def restore_spec(mc: MiniCluster, archive: str, unfit: str | None, ephemeral: bool) -> MiniCluster:
    """`mc` set to restore `archive` at start (spec.archive), after checking the archive when it is readable."""
    if mc.spec.flux.flavour != "builtin":
        raise RestoreRefused(
            "--restore: the flux flavour restores Flux's own content archive (spec.archive.path, as the Flux "
            "Operator does); the queue archive of `minicluster save` needs spec.flux.flavour: builtin"
        )
    path = archive_path(archive, ephemeral)
    if ephemeral or os.path.exists(path):
        try:
            found = read_archive(path, cluster=mc.name)
        except ArchiveError as exc:
            raise RestoreRefused(f"--restore: {exc}") from None
        counts = summary(found.manifest)
        click.echo(
            f"restoring {counts['jobs']} jobs saved from MiniCluster {counts['cluster'] or '?'} "
            f"({counts['pending']} to run, {counts['inactive']} done)",
            err=True,
        )
    else:
        click.echo(f"--restore: {path} is checked by the lead broker when it starts", err=True)
    update: ArchiveUpdate = {"path": path}
    if unfit:
        update["unfit"] = unfit
    archive_spec = mc.spec.archive.model_copy(update=update)
    return mc.model_copy(update={"spec": mc.spec.model_copy(update={"archive": archive_spec})})
