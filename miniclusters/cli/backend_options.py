"""What every verb acting on a cluster shares: the --backend/--context/--namespace options, opening that backend,
and a BackendError turned into its message and exit code (split from cluster_commands.py)."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from miniclusters.backends import DEFAULT_BACKEND, get_backend
from miniclusters.backends.base import Backend, BackendError, ClusterStatus

EXIT_INVALID = 2
BACKEND_ENV = "MINICLUSTER_BACKEND"

F = TypeVar("F", bound=Callable[..., Any])


def backend_options(func: F) -> F:
    """--backend, --context and --namespace on a click command."""
    func = click.option("-n", "--namespace", help="Kubernetes namespace (default: the context's).")(func)
    func = click.option("--context", help="kubeconfig context (kubernetes backend).")(func)
    func = click.option(
        "--backend",
        default=lambda: os.environ.get(BACKEND_ENV, DEFAULT_BACKEND),
        show_default=f"${BACKEND_ENV} or local",
        help="Where clusters run.",
    )(func)
    return func


def reach_scope(backend: str, context: str | None, namespace: str | None) -> str:
    """The options a later command needs to find the same cluster (pure): `--backend` unless it is the default
    backend, the kubeconfig context if one was named, the namespace the cluster is in (Kubernetes). Printed in
    `up`'s hints, so that each of them runs as printed in a shell without $MINICLUSTER_BACKEND."""
    words = [] if backend == DEFAULT_BACKEND else ["--backend", backend]
    if context:
        words += ["--context", context]
    if namespace:
        words += ["-n", namespace]
    return " ".join(shlex.quote(word) for word in words)


def open_backend(backend: str, context: str | None, namespace: str | None, **extra: Any) -> Backend:
    """The backend called `backend`; each backend refuses the options it does not take, in words."""
    options = {k: v for k, v in extra.items() if v is not None}
    if context:
        options["context"] = context
    if namespace:
        options["namespace"] = namespace
    return get_backend(backend, **options)


@contextmanager
def backend_errors() -> Iterator[None]:
    """BackendError -> message and exit code, never a traceback."""
    try:
        yield
    except BackendError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(getattr(exc, "exit_code", 1))


def print_status(status: ClusterStatus) -> None:
    from miniclusters.cli.status_view import render_status_text, status_document

    click.echo(render_status_text(status_document(status)))
