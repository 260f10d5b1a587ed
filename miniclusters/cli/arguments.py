"""Checks on flags and arguments shared by several verbs: a command is never blank, and a limit that comes from
the spec is named by its field path, not by a flag the user did not type (issue 24)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

BLANK = "empty (or only spaces): give the program to run and its arguments"


def command_text(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """Callback for a flag holding one command line (`--command`): '' or spaces only is refused, naming the flag
    (a blank value would otherwise fall back to the spec's command, or run nothing)."""
    if value is not None and not value.strip():
        raise click.BadParameter(BLANK)
    return value


def command_words(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """Callback for a COMMAND... argument: a program name that is '' or spaces only is refused."""
    if value and not value[0].strip():
        raise click.BadParameter(f"the program name is {BLANK}")
    return value


# open: a verb's flags and a spec section, whatever they hold
def source_of(key: str, flag: str, flags: Mapping[str, Any], spec_path: str, spec: Mapping[str, Any]) -> str:
    """Who set a setting, as a message names it: the flag when given, else the spec field, else the default."""
    if flags.get(key) is not None:
        return flag
    if spec.get(key):
        return f"{spec_path}.{key}"
    return f"the default {flag}"
