"""Ctrl-C in the CLI: every verb exits 130 on SIGINT, and a teardown the first Ctrl-C starts is not cut short by
the next one (a half-removed cluster would remain; issue 24)."""

from __future__ import annotations

import signal
import sys
from types import FrameType, TracebackType
from typing import Any

import click

EXIT_INTERRUPTED = 130
"""128 + SIGINT, as a shell reports a program Ctrl-C ended."""


class TeardownOnInterrupt:
    """While active, the first SIGINT or SIGTERM says what happens now and raises KeyboardInterrupt (the caller
    tears down what it started); later ones arrive during that teardown and are noted once, not raised."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, what: str) -> None:
        self.what = what
        self.fired = False
        self.repeated = False
        self._previous: dict[int, Any] = {}

    def _handle(self, _signum: int, _frame: FrameType | None) -> None:
        if not self.fired:
            self.fired = True
            click.echo(f"interrupted: {self.what}", err=True)
            raise KeyboardInterrupt
        if not self.repeated:
            self.repeated = True
            click.echo(f"interrupted again: still {self.what}; it finishes in a few seconds", err=True)

    def __enter__(self) -> TeardownOnInterrupt:
        for signum in self.SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _value: BaseException | None, _tb: TracebackType | None
    ) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


class InterruptExits130(click.Group):
    """The `minicluster` group: Ctrl-C in any verb that does not handle it itself ends it with one line and exit
    code 130 (click's own handling says "Aborted!" and exits 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
