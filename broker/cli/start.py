"""`flux start` and `flux broker` option parsing (hand-written: `-o` values begin with '-', and the broker
process should not pay for importing click)."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field

import hostlist

from ..attributes import AttrError, parse_setattr
from ..errors import InputError

START_USAGE = """\
Usage: flux start [OPTIONS] [COMMAND...]

  Start a Flux instance (one broker here, or N local brokers with --test-size) and run COMMAND in it.

Options:
  -o, --broker-opts=OPTS    comma-separated broker options (e.g. --config-path=DIR,-Stbon.fanout=2)
  -c, --config-path=DIR     broker config directory ([bootstrap] TOML); also --config
  -S, --setattr=ATTR=VAL    set a broker attribute
  -s, --test-size=N         start N brokers on this machine (127.0.0.x addresses)
      --test-hosts=HOSTLIST hostnames for the test brokers
      --hostname=NAME       pretend this broker runs on NAME (rank lookup)
  -v, --verbose             log broker activity
  -h, --help                show this message
"""

BROKER_USAGE = """\
Usage: flux broker [OPTIONS] [COMMAND...]

Options:
  -c, --config-path=DIR     broker config directory ([bootstrap] TOML); also --config
  -S, --setattr=ATTR=VAL    set a broker attribute (tbon.fanout, tbon.topo, broker.quorum, hostname, ...)
      --hostname=NAME       pretend this broker runs on NAME (rank lookup)
  -v, --verbose             log broker activity
  -h, --help                show this message
"""


class UsageError(InputError):
    """Bad command-line usage."""


@dataclass
class StartArgs:
    """What `flux start` and `flux broker` were asked for, parsed from their command lines."""

    config_path: str | None = None
    attrs: list[tuple[str, str]] = field(default_factory=list)
    test_size: int | None = None
    test_hosts: list[str] | None = None
    hostname: str | None = None
    verbose: bool = False
    command: list[str] = field(default_factory=list)
    help: bool = False


_BROKER_VALUE_OPTS = {
    "-c": "config",
    "--config-path": "config",
    "--config": "config",
    "-S": "setattr",
    "--setattr": "setattr",
    "--hostname": "hostname",
}
_START_VALUE_OPTS = {
    **_BROKER_VALUE_OPTS,
    "-o": "broker-opts",
    "--broker-opts": "broker-opts",
    "-s": "test-size",
    "--test-size": "test-size",
    "--test-hosts": "test-hosts",
    "--rundir": "rundir",
}


def _split(token: str, value_opts: dict[str, str]) -> tuple[str, str | None] | None:
    """Recognise '--opt=value', '--opt', '-Xvalue', '-X'; None if token is not a known option."""
    if token.startswith("--"):
        name, sep, value = token.partition("=")
        if name in value_opts:
            return value_opts[name], value if sep else None
        if name in ("--verbose", "--help") and not sep:
            return name[2:], None
        raise UsageError(f"unknown option {name!r}")
    if token.startswith("-") and len(token) >= 2:
        short = token[:2]
        if short in value_opts:
            return value_opts[short], token[2:] or None
        if token in ("-v", "-h"):
            return {"-v": "verbose", "-h": "help"}[token], None
        raise UsageError(f"unknown option {short!r}")
    return None


def _apply(args: StartArgs, key: str, value: str) -> None:
    try:
        if key == "config":
            args.config_path = value
        elif key == "setattr":
            args.attrs.append(parse_setattr(value))
        elif key == "hostname":
            args.hostname = value
        elif key == "rundir":
            args.attrs.append(("rundir", value))
        elif key == "test-size":
            args.test_size = int(value)
            if args.test_size < 1:
                raise UsageError("--test-size must be >= 1")
        elif key == "test-hosts":
            args.test_hosts = hostlist.expand_hostlist(value)
        elif key == "broker-opts":
            for item in value.split(","):
                _parse_tokens(args, shlex.split(item), _BROKER_VALUE_OPTS, allow_command=False)
    except ValueError as exc:
        if isinstance(exc, UsageError):
            raise
        raise UsageError(f"invalid value {value!r} for {key}: {exc}") from None
    except AttrError as exc:
        raise UsageError(str(exc)) from None


def _parse_tokens(args: StartArgs, tokens: list[str], value_opts: dict[str, str], allow_command: bool) -> None:
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            args.command = tokens[i + 1 :]
            if not allow_command and args.command:
                raise UsageError(f"unexpected argument {args.command[0]!r} in broker options")
            return
        parsed = _split(token, value_opts)
        if parsed is None:
            if not allow_command:
                raise UsageError(f"unexpected argument {token!r} in broker options")
            args.command = tokens[i:]
            return
        key, value = parsed
        if key in ("verbose", "help"):
            setattr(args, key, True)
            i += 1
            continue
        if value is None:
            if i + 1 >= len(tokens):
                raise UsageError(f"option {token} needs a value")
            value = tokens[i + 1]
            i += 1
        if key == "broker-opts" and value.rsplit(",", 1)[-1] in _BROKER_VALUE_OPTS:
            # operator style `-o --config DIR`: the broker option's value is the next word
            if i + 1 >= len(tokens):
                raise UsageError(f"broker option {value.rsplit(',', 1)[-1]} needs a value")
            joiner = "=" if value.rsplit(",", 1)[-1].startswith("--") else ""
            value = f"{value}{joiner}{tokens[i + 1]}"
            i += 1
        _apply(args, key, value)
        i += 1


def parse_start(argv: list[str]) -> StartArgs:
    args = StartArgs()
    _parse_tokens(args, argv, _START_VALUE_OPTS, allow_command=True)
    return args


def parse_broker(argv: list[str]) -> StartArgs:
    args = StartArgs()
    _parse_tokens(args, argv, _BROKER_VALUE_OPTS, allow_command=True)
    return args


def _run_single(args: StartArgs) -> int:
    from ..attributes import Attributes
    from ..bootstrap import BootstrapError, load_config, parse_bootstrap
    from ..broker import BrokerOptions, run_broker
    from ..modules import default_modules

    hostname = args.hostname or dict(args.attrs).get("hostname")
    try:
        config = (
            load_config(args.config_path, hostname) if args.config_path else parse_bootstrap({}, "<none>", hostname)
        )
    except BootstrapError as exc:
        print(f"flux-broker: {exc}", file=sys.stderr)
        return 1
    options = BrokerOptions(
        config=config,
        attrs=Attributes(args.attrs),
        hostname=hostname,
        command=args.command,
        verbose=args.verbose,
        modules=default_modules(),
    )
    return run_broker(options)


def main_start(argv: list[str]) -> int:
    try:
        args = parse_start(argv)
    except UsageError as exc:
        print(f"flux-start: {exc}\n\n{START_USAGE}", file=sys.stderr)
        return 2
    if args.help:
        print(START_USAGE)
        return 0
    if args.test_size is not None:
        if args.config_path:
            print("flux-start: --test-size generates its own bootstrap config; drop --config-path", file=sys.stderr)
            return 2
        shared = sorted({name for name, _ in args.attrs} & {"rundir", "local-uri"})
        if shared:
            print(
                f"flux-start: -S{shared[0]}: each --test-size broker has its own (they would share one); "
                "drop it, or start one broker without --test-size",
                file=sys.stderr,
            )
            return 2
        from ..testsize import run_test_instance

        return run_test_instance(args.test_size, args.command, args.attrs, args.test_hosts, args.verbose)
    return _run_single(args)


def main_broker(argv: list[str]) -> int:
    try:
        args = parse_broker(argv)
    except UsageError as exc:
        print(f"flux-broker: {exc}\n\n{BROKER_USAGE}", file=sys.stderr)
        return 2
    if args.help:
        print(BROKER_USAGE)
        return 0
    return _run_single(args)
