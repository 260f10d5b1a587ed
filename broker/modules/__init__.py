"""Broker modules: the job manager (lead), job exec (every rank), scheduler glue, MPI launch, sub-instances."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..port import Module


def default_modules() -> list[Module]:
    """What every broker of an instance loads (each module decides by rank whether it runs)."""
    from .job_exec_entry import job_exec
    from .job_manager import job_manager
    from .restful import restful

    return [job_exec, job_manager, restful]


def import_for_sharing() -> None:
    """Import what job exec and the job manager load on first use (job_exec_entry.py, job_manager/__init__.py), for
    a process about to fork many brokers (`flux start --test-size=N`, N > 1): their pages are then shared by every
    broker that runs a job, instead of each importing its own copy (about 0.75 MB and 4 ms of CPU per broker for
    job exec). A single broker imports nothing it may never use (issue 45, an idle broker's memory)."""
    from . import job_exec  # noqa: F401
    from .job_manager import manager  # noqa: F401
