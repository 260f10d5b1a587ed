"""FluxError without importing zmq, so lean clients (the job CLI) can raise and catch it cheaply."""

from __future__ import annotations


class FluxError(OSError):
    """An error response (errno + message) or a broker that cannot be reached."""

    def __init__(self, errnum: int, message: str) -> None:
        super().__init__(errnum, message)
        self.errnum = errnum
        self.message = message

    def __str__(self) -> str:
        return self.message
