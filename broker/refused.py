"""How a broker refuses to start on input that can never work, so that whatever started it stops waiting at once.

A lead broker whose input is wrong for good (the archive of `content.restore` is damaged, foreign or hostile)
prints one line `flux-broker: refusing to start: <reason>` on stderr and exits with EXIT_REFUSED. Restarting it
cannot help: a local pod's supervisor does not restart it, and `minicluster up` stops waiting and shows the
reason, which it reads from the pod's log (local) or from its container's termination message (Kubernetes, where
the broker container's terminationMessagePolicy is FallbackToLogsOnError: the log's tail).

Standard library only and tiny: the local pod supervisor and the CLI's wait loop read it.
"""

from __future__ import annotations

EXIT_REFUSED = 78
"""sysexits.h's EX_CONFIG (a configuration error): no other exit of our broker or entrypoint uses it."""
MARKER = "flux-broker: refusing to start: "


def refusal_line(reason: str) -> str:
    return f"{MARKER}{reason}"


def refusal_reason(log: str) -> str | None:
    """The reason in (the tail of) a refused broker's log: the text after the last marker line; None without one."""
    for line in reversed(log.splitlines()):
        at = line.find(MARKER)
        if at >= 0:
            return line[at + len(MARKER) :].strip() or None
    return None
