"""Run the REST API for an instance: `flux restful serve` (the lead broker starts it when asked)."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.rest.flux_service import FluxJobService
    from broker.rest.jobs import BrokerJobService
    from broker.rest.settings import RestSettings

FLAVOURS = ("builtin", "flux")
UNUSED_PACKAGES = ("cryptography", "pydantic.v1")
SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the interpreter lock while another waits for it (CPython's default is 0.005).
The event loop thread waits for the lock whenever a worker thread is running Python (the flux flavour builds
each submit's jobspec in one, the pages render in them), and every wait was up to 5 ms added to whatever
request the loop was serving; measured with 4 clients submitting to the flux flavour (bench/bench_rest.py),
a GET's median during the submits went from about 2.1x its idle value to about 1.9x."""


class _Unused:
    """Declines to import packages this process never uses, where a dependency would load them just in case.

    PyJWT imports `cryptography` (about 9 MB resident: its own OpenSSL) only to offer RSA and EC keys when it is
    installed; our tokens are HS256 (the standard library's hmac), so without it PyJWT works the same and the
    server is that much smaller (issue 27's memory target; bench/bench_memory.py measures it). Likewise FastAPI
    imports `pydantic.v1` (1.4 MB resident) only to ask whether each route's types are pydantic v1 models, and
    takes an ImportError as "no"; ours are all v2."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if any(name == unused or name.startswith(unused + ".") for unused in UNUSED_PACKAGES):
            raise ModuleNotFoundError(f"{name} is not used by the REST server", name=name)
        return None


def decline_unused_imports() -> None:
    if not any(isinstance(finder, _Unused) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Unused())


def _port(text: str) -> int:
    """--port as FLUX_RESTFUL_PORT is read (settings.py): a port number, refused up front, not at bind."""
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 1-65535, got {text!r}")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flux restful serve", description=__doc__)
    parser.add_argument("--host", help="address to listen on (default $FLUX_RESTFUL_HOST or 0.0.0.0)")
    parser.add_argument("--port", type=_port, help="port 1-65535 (default $FLUX_RESTFUL_PORT or 5000)")
    parser.add_argument("--state-dir", help="where the user database lives (default: $FLUX_URI's rundir/restful)")
    parser.add_argument("--uri", help="the instance (default $FLUX_URI)")
    parser.add_argument(
        "--flavour",
        choices=FLAVOURS,
        default=None,
        help="builtin: our broker; flux: flux-core through the flux-python bindings "
        "(default $MINICLUSTER_FLAVOUR or builtin)",
    )
    return parser


def _flavour(args: argparse.Namespace) -> str | None:
    """The flavour asked for, or None (said why on stderr) when it cannot be served here."""
    flavour: str = args.flavour or os.environ.get("MINICLUSTER_FLAVOUR") or "builtin"
    if flavour not in FLAVOURS:
        print(f"flux restful serve: MINICLUSTER_FLAVOUR={flavour!r}: expected builtin or flux", file=sys.stderr)
        return None
    if flavour == "flux":
        from broker.rest.flux_service import import_flux

        try:
            import_flux()
        except ImportError as exc:
            print(
                f"flux restful serve: the flux flavour needs flux-core's Python bindings (import flux failed: {exc}); "
                "install flux-core or use --flavour builtin",
                file=sys.stderr,
            )
            return None
    return flavour


def _settings(args: argparse.Namespace, uri: str) -> RestSettings | None:
    """The settings from the environment, or None (said why on stderr)."""
    from broker.rest.settings import RestSettings, SettingsError

    state_dir = Path(args.state_dir) if args.state_dir else Path(uri.removeprefix("local://")).parent / "restful"
    try:
        settings = RestSettings.from_env(state_dir)
    except SettingsError as exc:
        print(f"flux restful serve: {exc}", file=sys.stderr)
        return None
    if settings.require_auth and not settings.superuser:
        print(
            "flux restful serve: note: no FLUX_USER/FLUX_TOKEN given; only users in the database can log in",
            file=sys.stderr,
        )
    return settings


def _service(flavour: str, uri: str) -> BrokerJobService | FluxJobService:
    if flavour == "flux":
        from broker.rest.flux_service import FluxJobService

        return FluxJobService(uri)
    from broker.rest.jobs import BrokerJobService

    return BrokerJobService(uri)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sys.setswitchinterval(SWITCH_INTERVAL)
    decline_unused_imports()  # before anything imports PyJWT (the settings do)
    flavour = _flavour(args)
    if flavour is None:
        return 2
    uri = args.uri or os.environ.get("FLUX_URI")
    if not uri:
        print("flux restful serve: FLUX_URI is not set: run inside an instance or pass --uri", file=sys.stderr)
        return 2
    settings = _settings(args, uri)
    if settings is None:
        return 2

    import uvicorn

    from broker.rest.app import create_app

    service = _service(flavour, uri)
    app = create_app(settings, service)
    if flavour != "flux":
        from broker.rest.metrics import broker_source, metrics_router

        app.include_router(metrics_router(broker_source(uri)))  # custom.metrics.k8s.io for HPAs
    # The app's startup objects (FastAPI's, pydantic's, the routes': over 50,000) would be traversed by every
    # full collection, 35 ms on this machine, a stall for whichever requests are in flight: frozen, a full
    # collection looks only at what the requests themselves left behind.
    gc.collect()
    gc.freeze()
    host = args.host or settings.host
    port = args.port or settings.port
    try:
        # ws="none": the API has no WebSocket route, and uvicorn would load wsproto for one (0.8 MB resident)
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, ws="none")
    except OSError as exc:
        print(f"flux restful serve: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    finally:
        service.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
