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
