"""Text made safe for one cell of a Markdown table, shared by the generated reference pages.

A pipe splits cells, so outside code it is escaped (`\\|`, shown as `|`); inside a code span Python-Markdown keeps
the pipe in the cell already and would print an escape as it is (`a\\|b` was shown), so there it stays bare."""

from __future__ import annotations

import re

CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def cell(text: object) -> str:
    """One line, pipes escaped outside code spans."""
    line = " ".join(str(text).split())
    out: list[str] = []
    last = 0
    for span in CODE_SPAN.finditer(line):
        out.append(line[last : span.start()].replace("|", "\\|"))
        out.append(span.group(0))
        last = span.end()
    out.append(line[last:].replace("|", "\\|"))
    return "".join(out)
