"""A test instance's [bootstrap] TOML, written without tomli_w.

Why (issue 45, an idle broker's memory): `flux start --test-size` writes it before it forks its brokers, so every
module it imports for that is in every broker, and tomli_w is one only the writing needs; the TOML is a table of
strings (tomllib reads it back, tests/broker/test_start_files.py holds the two equal).
"""

from __future__ import annotations


def toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped (TOML 1.0, section String)."""
    out = ['"']
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char < " " or char == "\x7f":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def bootstrap_toml(hosts: list[dict[str, str]], curve_cert: str | None) -> str:
    """The [bootstrap] table a test instance's brokers read: its curve certificate and one inline table per host."""
    lines = ["[bootstrap]"]
    if curve_cert is not None:
        lines.append(f"curve_cert = {toml_string(curve_cert)}")
    lines.append("hosts = [")
    for host in hosts:
        fields = ", ".join(f"{key} = {toml_string(value)}" for key, value in host.items())
        lines.append(f"    {{ {fields} }},")
    lines.append("]")
    return "\n".join(lines) + "\n"
