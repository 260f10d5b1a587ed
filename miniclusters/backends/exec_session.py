"""Ending a command run in a pod when whoever asked for it goes away (Ctrl-C, SIGTERM from `timeout`, a closed
terminal) or its timeout passes: as `kubectl exec -t` ends its stream and the process loses its terminal.

Neither a killed `podman exec` nor a closed Kubernetes exec stream (without a tty) stops the process in the
container, and a local pod's command may leave its session. So every exec carries a mark of its own in its
environment, inherited by everything it starts; ending it signals every process in the pod carrying that mark:
SIGHUP and SIGTERM (a lost terminal), then SIGKILL to what is left after a grace period.
"""

from __future__ import annotations

import uuid

EXEC_VARIABLE = "MINICLUSTERS_EXEC"
"""The environment variable marking one exec's processes (its value is that exec's token)."""

END_GRACE = 2.0
"""Seconds between SIGHUP/SIGTERM and SIGKILL when an exec is ended."""

_STEP = 0.2

# POSIX sh: pids whose environment holds the mark (GNU grep reads NUL-separated files in one process; else tr and
# grep per process, as busybox has them), HUP and TERM, wait, KILL.
END_SCRIPT = r"""mark="$1=$2"; steps="$3"; step="$4"
if printf 'x\000' | grep -qzxF x 2>/dev/null; then
  marked() { grep -lszxF "$mark" /proc/[0-9]*/environ | sed 's,^/proc/,,; s,/environ$,,'; }
else
  marked() {
    for e in /proc/[0-9]*/environ; do
      if tr '\000' '\n' 2>/dev/null < "$e" | grep -qxF "$mark"; then p=${e#/proc/}; echo "${p%/environ}"; fi
    done
  }
fi
pids=$(marked); [ -n "$pids" ] || exit 0
kill -HUP $pids 2>/dev/null; kill -TERM $pids 2>/dev/null
while [ "$steps" -gt 0 ]; do
  sleep "$step"; pids=$(marked); [ -n "$pids" ] || exit 0; steps=$((steps - 1))
done
kill -KILL $pids 2>/dev/null; exit 0
"""


def new_token() -> str:
    """One exec's mark: unique on this machine and in every pod."""
    return uuid.uuid4().hex


def marked(argv: list[str], token: str) -> list[str]:
    """argv run with the exec's mark in its environment (for runtimes that take a command line only)."""
    return ["env", f"{EXEC_VARIABLE}={token}", *argv]


def end_argv(token: str, grace: float = END_GRACE) -> list[str]:
    """The command that, run in the same pod, ends every process of the exec marked `token`."""
    steps = max(1, round(grace / _STEP))
    return ["sh", "-c", END_SCRIPT, "sh", EXEC_VARIABLE, token, str(steps), str(_STEP)]
