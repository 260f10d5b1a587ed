"""Ctrl-C in the CLI: every verb exits 130 on SIGINT, and a teardown the first Ctrl-C starts is not cut short by
the next one (a half-removed cluster would remain; issue 24)."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any

import click

EXIT_INTERRUPTED = 130
"""128 + SIGINT, as a shell reports a program Ctrl-C ended."""


class TeardownOnInterrupt:
    """While active, the first SIGINT or SIGTERM (or any of `signals`) says what happens now and raises
    KeyboardInterrupt (the caller tears down what it started); later ones arrive during that teardown and are noted
    once, not raised. `signum` is the first one's number (exit 128 + signum, as a shell reports it)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, what: str, signals: tuple[int, ...] = SIGNALS) -> None:
        self.what = what
        self.signals = signals
        self.fired = False
        self.repeated = False
        self.signum = int(signal.SIGINT)
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if not self.fired:
            self.fired = True
            self.signum = signum
            _say(f"interrupted: {self.what}")
            raise KeyboardInterrupt
        if not self.repeated:
            self.repeated = True
            _say(f"interrupted again: still {self.what}; it finishes in a few seconds")

    def __enter__(self) -> TeardownOnInterrupt:
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _value: BaseException | None, _tb: TracebackType | None
    ) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


@contextmanager
def exit_on_signals(what: str) -> Iterator[None]:
    """Ctrl-C, SIGTERM (as `timeout` sends) or SIGHUP (a closed terminal) raise KeyboardInterrupt inside, so the
    code there ends what it started (`minicluster exec`: the command in the pod); then exit 128 + signum."""
    guard = TeardownOnInterrupt(what, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
    try:
        with guard:
            yield
    except KeyboardInterrupt:
        sys.exit(128 + guard.signum)


def _say(line: str) -> None:
    """A line on stderr, which may be a terminal already gone (SIGHUP): the teardown matters more than the line."""
    with contextlib.suppress(OSError):
        click.echo(line, err=True)


class InterruptExits130(click.Group):
    """The `minicluster` group: Ctrl-C in any verb that does not handle it itself ends it with one line and exit
    code 130 (click's own handling says "Aborted!" and exits 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
