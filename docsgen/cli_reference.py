"""The CLI reference pages, generated from the commands themselves so they cannot drift from `--help`.

`minicluster` is one click group: walked command by command into Markdown (usage, help, an options table).
`flux` mixes lean argument parsers (fast start-up) with click groups, so each command's own `--help` text is
captured in-process and shown as it prints."""

from __future__ import annotations

import contextlib
import html
import io
from collections.abc import Iterator

import click

from docsgen.markdown_cells import cell


def _help_text(command: click.Command) -> str:
    """The command's help as Markdown: click's `\\b` (keep this paragraph as is) becomes a text block."""
    paragraphs = (command.help or command.short_help or "").strip().split("\n\n")
    out: list[str] = []
    for paragraph in paragraphs:
        lines = [line.rstrip() for line in paragraph.strip("\n").splitlines()]
        if lines and lines[0].strip() == "\b":
            body = [line for line in lines[1:] if line.strip()]
            indent = min((len(line) - len(line.lstrip()) for line in body), default=0)
            out.append("```text\n" + "\n".join(line[indent:] for line in body) + "\n```")
        else:
            out.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(part for part in out if part)


def _code_cell(text: str) -> str:
    """A table cell in code font: an HTML code element, since in a Markdown code span the pipe's escape stays
    visible (`[easy\\|fcfs]` was printed)."""
    return "<code>" + html.escape(" ".join(text.split())).replace("|", "&#124;") + "</code>"


def _walk(command: click.Command, path: list[str], parent: click.Context | None) -> Iterator[str]:
    ctx = click.Context(command, info_name=path[-1], parent=parent)
    heading = "#" * min(len(path) + 1, 4)
    yield f"{heading} `{' '.join(path)}`\n"
    yield f"```text\n{command.get_usage(ctx).strip()}\n```\n"
    text = _help_text(command)
    if text:
        yield text + "\n"
    options = [param for param in command.get_params(ctx) if isinstance(param, click.Option)]
    records = [record for param in options if (record := param.get_help_record(ctx))]
    if records:
        yield "| option | meaning |\n|---|---|"
        for names, meaning in records:
            yield f"| {_code_cell(names)} | {cell(meaning)} |"
        yield ""
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _walk(sub, [*path, name], ctx)


def minicluster_page() -> str:
    from miniclusters.cli import main

    intro = (
        "# `minicluster` command reference\n\n"
        "Generated from the commands themselves when the site is built (`minicluster COMMAND --help` prints "
        "the same). Exit codes: 0 success, 1 a failure (with the reason), 2 bad input (naming the flag or "
        "field; nothing changed), 130 interrupted.\n"
    )
    return intro + "\n" + "\n".join(_walk(main, ["minicluster"], None)) + "\n"


def _flux_help(args: list[str]) -> str:
    """What `flux ARGS --help` prints, captured in-process."""
    from broker.cli import flux

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), contextlib.suppress(SystemExit):
        flux._dispatch([*args, "--help"])
    return out.getvalue().rstrip()


def flux_page() -> str:
    from broker.cli import flux
    from broker.cli.commands import cli
    from broker.cli.jobcli import SUMMARIES

    names = sorted({*flux.OWN_COMMANDS, *SUMMARIES, *cli.commands})
    parts = [
        "# `flux` command reference (built-in broker)\n",
        "The `flux` command installed with this package speaks Flux's spellings (see "
        "[the built-in broker](../broker.md)). Generated from each command's own `--help` when the site is "
        "built. In the `flux` flavour the pods run flux-core's own `flux` instead.\n",
        "```text\n" + _flux_help([]) + "\n```\n",
    ]
    for name in names:
        parts.append(f"## `flux {name}`\n")
        parts.append("```text\n" + _flux_help(name.split()) + "\n```\n")
        group = cli.commands.get(name)
        if isinstance(group, click.Group):
            for sub in group.list_commands(click.Context(group)):
                parts.append(f"### `flux {name} {sub}`\n")
                parts.append("```text\n" + _flux_help([name, sub]) + "\n```\n")
    return "\n".join(parts)
