"""The broker package's errors: one root, and a kind for each way things go wrong, so a caller can catch by kind
(`except InputError` for anything wrong as given, `except BrokerBaseError` for anything the broker raises on
purpose). Standard library only, so lean clients (the job CLI) can raise and catch them cheaply.

    BrokerBaseError
    ├── InputError (ValueError)      input wrong as given, the message names it: config fields and attributes,
    │                                bootstrap, certificates, addresses, idsets, topologies, jobspecs, job ids,
    │                                archives, CLI options and formats, REST users, tokens, settings, submissions
    ├── BrokerFailure (RuntimeError) something failed while running: start-up (BrokerError, StartRefused), the
    │                                overlay, the journal, job state transitions, the REST client
    ├── FluxError (OSError)          an error response (errno + message) or a broker that cannot be reached
    ├── ServiceError                 what a service handler answers a request with (errno + message)
    └── the REST pages' and CLI's control flow (LoginRequired, PageError, CsrfError, BodyTooLarge, AdminError,
        CommandError)
"""

from __future__ import annotations


class BrokerBaseError(Exception):
    """The root of every error the broker package raises on purpose."""


class InputError(BrokerBaseError, ValueError):
    """Input that is wrong as given; the message names the field, flag or file."""


class BrokerFailure(BrokerBaseError, RuntimeError):
    """Something failed while running (not the caller's input)."""


class FluxError(BrokerBaseError, OSError):
    """An error response (errno + message) or a broker that cannot be reached."""

    def __init__(self, errnum: int, message: str) -> None:
        super().__init__(errnum, message)
        self.errnum = errnum
        self.message = message

    def __str__(self) -> str:
        return self.message
