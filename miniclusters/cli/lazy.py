"""A click group that imports a verb's module only when that verb runs.

`minicluster` has some thirty verbs over pydantic models, the REST client, the simulator and the Kubernetes client;
importing them all cost about 0.9 s of CPU on every call, which a script calling `minicluster status` in a loop, and
a 500m pod sharing its node, both pay. `--help` and the docs still see every verb (list_commands/get_command)."""

from __future__ import annotations

import importlib

import click

from miniclusters.cli.interrupts import InterruptExits130


class LazyGroup(InterruptExits130):
    """Verbs named up front as ``name -> "module:attribute"``; each module is imported on first use."""

    def __init__(self, *args: object, lazy_commands: dict[str, str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy_commands.get(cmd_name)
        if target is None or cmd_name in self.commands:
            return super().get_command(ctx, cmd_name)
        module_name, attribute = target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command) or command.name != cmd_name:
            raise RuntimeError(f"{target} is not the click command {cmd_name!r}")  # a wrong table entry: our bug
        self.add_command(command)
        return command
