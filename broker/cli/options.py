"""A tiny getopt for the job commands: Flux's option spellings, no click (`flux run true` must start fast).

Each command declares its options as `Opt`s. Options Flux has but we do not implement are declared
`unsupported` so they fail with "not supported" rather than "unknown option".
"""

from __future__ import annotations

from broker.errors import InputError

from .lean_typing import cast

TYPE_CHECKING = False  # typing's import costs `flux run true` 5 ms: annotations only
if TYPE_CHECKING:
    from .option_values import IntOption, OptionValues


class OptionError(InputError):
    """Bad usage; the message is printed after the command name."""


class Opt:
    """One option. A plain class: a dataclass costs `flux run` ~6 ms of start-up, a NamedTuple needs typing."""

    __slots__ = ("dest", "help", "kind", "names", "unsupported")

    def __init__(
        self, names: tuple[str, ...], dest: str, kind: str = "value", unsupported: bool = False, help: str = ""
    ) -> None:
        self.names = names  # e.g. ("-n", "--ntasks")
        self.dest = dest
        self.kind = kind  # value | flag | multi | count
        self.unsupported = unsupported
        self.help = help

    def __repr__(self) -> str:
        return f"Opt({self.names!r}, {self.dest!r}, {self.kind!r})"

    @property
    def takes_value(self) -> bool:
        return self.kind in ("value", "multi")


def parse(argv: list[str], opts: list[Opt], interleave: bool = False) -> tuple[OptionValues, list[str]]:
    """(values by dest, positional args). Without interleave, options stop at the first positional (the command)."""
    table: dict[str, Opt] = {name: opt for opt in opts for name in opt.names}
    values: dict[str, str | int | list[str]] = {}
    positional: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            positional += argv[i + 1 :]
            break
        if not token.startswith("-") or token == "-" or (token[1:].isdigit() and positional):
            if not interleave:
                positional += argv[i:]
                break
            positional.append(token)
            i += 1
            continue
        if token.startswith("--"):
            name, sep, inline = token.partition("=")
            value: str | None = inline if sep else None
        else:
            name, value = token[:2], (token[2:] or None)
        opt = table.get(name)
        if opt is None:
            raise OptionError(f"unrecognized option '{name}'")
        if opt.unsupported:
            raise OptionError(f"option {opt.names[-1]} is not supported by this broker")
        if not opt.takes_value:
            if value is not None and token.startswith("--"):
                raise OptionError(f"option {name} takes no value")
            if value is not None:  # bundled short flags like -av
                argv = [*argv[: i + 1], f"-{value}", *argv[i + 1 :]]
            counted = values.get(opt.dest, 0)
            values[opt.dest] = (counted if isinstance(counted, int) else 0) + 1 if opt.kind == "count" else True
            i += 1
            continue
        if value is None:
            if i + 1 >= len(argv):
                raise OptionError(f"option {name} requires a value")
            i += 1
            value = argv[i]
        if opt.kind == "multi":
            given = values.setdefault(opt.dest, [])
            if isinstance(given, list):
                given.append(value)
        else:
            values[opt.dest] = value
        i += 1
    return cast("OptionValues", values), positional


def as_int(values: OptionValues, key: IntOption, default: int | None, minimum: int = 0) -> int | None:
    raw = values.get(key)
    if raw is None:
        return default
    try:
        number = int(raw)
    except ValueError:
        raise OptionError(f"--{key.replace('_', '-')}: expected an integer, got {raw!r}") from None
    if number < minimum:
        raise OptionError(f"--{key.replace('_', '-')}: must be at least {minimum}")
    return number


def usage(command: str, summary: str, opts: list[Opt]) -> str:
    lines = [f"Usage: flux {command}", "", f"  {summary}", "", "Options:"]
    for opt in opts:
        if opt.unsupported:
            continue
        spelled = ", ".join(opt.names) + ("=VALUE" if opt.takes_value else "")
        lines.append(f"  {spelled:<30} {opt.help}")
    return "\n".join(lines)
