"""What starts a broker (BrokerOptions), its start-up errors, and the defaults its settings fall back to.

Below the broker and its parts: every one of them may import it, it imports none of them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from .attributes import Attributes
from .bootstrap import BootstrapConfig
from .curve_cert import CurveCertificate
from .errors import BrokerFailure
from .payloads import ResourceReport
from .port import Module

DEFAULT_HEARTBEAT_INTERVAL = 1.0
DEFAULT_HEARTBEAT_TIMEOUT = 30.0  # silence only; a closed connection is seen at once (tree_link.DISCONNECT_GRACE_BEATS)
DEFAULT_CONNECT_TIMEOUT = 30.0  # Flux's tbon.connect_timeout default
SHUTDOWN_GRACE = 5.0


class BrokerError(BrokerFailure):
    """A start-up problem; the message says what is wrong (config field, file, address)."""


class StartRefused(BrokerError):
    """Input that can never work (a hostile or damaged `content.restore` archive): the broker exits with
    refused.EXIT_REFUSED so that nothing restarts it or waits for it (broker/refused.py)."""


@dataclass
class BrokerOptions:
    """Everything `flux broker` / `flux start` collect from the command line."""

    config: BootstrapConfig
    attrs: Attributes = field(default_factory=Attributes)
    hostname: str | None = None
    command: list[str] = field(default_factory=list)
    verbose: bool = False
    modules: list[Module] = field(default_factory=list)
    handle_sigint: bool = True
    cert: CurveCertificate | None = None  # pre-loaded (test-size forks share one parse)
    resources: ResourceReport | None = None
    """This machine's usable cores and memory, measured once by a process forking many brokers on it (test-size);
    each broker then reports them under its own rank and hostname instead of reading the cgroup files itself."""


def log_line(rank: int, text: str) -> None:
    """A line on stderr, as flux-broker[rank]."""
    print(f"flux-broker[{rank}]: {text}", file=sys.stderr, flush=True)
