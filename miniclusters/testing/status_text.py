"""Read `minicluster status` text back into facts, so tests can prove the text says what the JSON says."""

from __future__ import annotations

import re
from typing import Any

HEADER = re.compile(r"^(Name|Namespace|State|Size|Pods|Ranks|REST API):\s+(.*)$")
SIZE = re.compile(r"^(\d+) pods? \(min (\d+), max (\d+)\)$")
PODS = re.compile(r"^(\d+) running, (\d+) ready$")
UNSCHEDULED = re.compile(r"^  pods? ([\d,-]+): (.*)$")


def _indices(idset: str) -> list[int]:
    """ "2-5,7" -> [2, 3, 4, 5, 7]."""
    out: list[int] = []
    for part in idset.split(","):
        first, _, last = part.partition("-")
        out += range(int(first), int(last or first) + 1)
    return out


def _columns(header: str) -> list[tuple[str, int]]:
    return [(m.group(0), m.start()) for m in re.finditer(r"\S+", header)]


def _cells(line: str, columns: list[tuple[str, int]]) -> dict[str, str]:
    cells = {}
    for i, (name, start) in enumerate(columns):
        end = columns[i + 1][1] if i + 1 < len(columns) else None
        cells[name] = line[start:end].strip()
    return cells


def parse_status_text(text: str) -> dict[str, Any]:  # open: `minicluster status` output as JSON of any shape
    """{"header": {...}, "conditions": [{TYPE, STATUS, REASON, MESSAGE}], "pods": [{POD, READY, ...}],
    "unscheduled": {pod index: the scheduler's words}}."""
    lines = text.splitlines()
    header: dict[str, str] = {}
    conditions: list[dict[str, str]] = []
    pods: list[dict[str, str]] = []
    section = "header"
    columns: list[tuple[str, int]] = []
    for line in lines:
        if section == "header":
            match = HEADER.match(line)
            if match:
                header[match.group(1)] = match.group(2)
                continue
            if line == "Conditions:":
                section = "conditions-head"
                continue
            if line.startswith("POD "):
                section, columns = "pods", _columns(line)
                continue
        elif section == "conditions-head":
            section, columns = "conditions", _columns(line)
            continue
        elif section == "conditions":
            if not line.strip():
                section = "header"
                continue
            conditions.append(_cells(line, columns))
            continue
        elif section == "pods":
            if not line.strip():
                break  # the table ends at a blank line
            pods.append(_cells(line, columns))
            continue
        if line.startswith("POD "):
            section, columns = "pods", _columns(line)
    return {"header": header, "conditions": conditions, "pods": pods, "unscheduled": _unscheduled(lines)}


def _unscheduled(lines: list[str]) -> dict[int, str]:
    """The "Not scheduled:" section: pod index -> the scheduler's words."""
    if "Not scheduled:" not in lines:
        return {}
    said: dict[int, str] = {}
    for line in lines[lines.index("Not scheduled:") + 1 :]:
        match = UNSCHEDULED.match(line)
        if match is None:
            break
        said.update(dict.fromkeys(_indices(match.group(1)), match.group(2)))
    return said


# open: `minicluster status` output as JSON of any shape
def disagreements(text: str, document: dict[str, Any]) -> list[str]:
    """Every fact where the text and the JSON document of one status differ (empty when they agree)."""
    parsed = parse_status_text(text)
    header = parsed["header"]
    wrong: list[str] = []

    def check(what: str, shown: object, fact: object) -> None:
        if shown != fact:
            wrong.append(f"{what}: text {shown!r}, JSON {fact!r}")

    check("name", header.get("Name"), document["name"])
    check("namespace", header.get("Namespace"), document["namespace"])
    check("state", header.get("State"), document["state"])
    size = SIZE.match(header.get("Size", ""))
    sizes = (document["size"], document["min_size"], document["max_size"])
    check("size", size and tuple(map(int, size.groups())), sizes)
    pods = PODS.match(header.get("Pods", ""))
    check("pods", pods and tuple(map(int, pods.groups())), (document["running_pods"], document["ready_pods"]))
    check("ranks", header.get("Ranks"), document["ranks"])
    check("rest url", header.get("REST API"), document.get("rest_url"))
    check("conditions", len(parsed["conditions"]), len(document["conditions"]))
    for shown, fact in zip(parsed["conditions"], document["conditions"], strict=False):
        for column, key in (("TYPE", "type"), ("STATUS", "status"), ("REASON", "reason"), ("MESSAGE", "message")):
            check(f"condition {fact['type']} {key}", shown[column], fact[key] or "-")
    check("pods", len(parsed["pods"]), len(document["pods"]))
    for shown, fact in zip(parsed["pods"], document["pods"], strict=False):
        name = fact["name"]
        check(f"{name} name", shown["POD"], name)
        check(f"{name} ready", shown["READY"], "1/1" if fact["ready"] else "0/1")
        check(f"{name} status", shown["STATUS"], fact["status"])
        check(f"{name} restarts", shown["RESTARTS"], str(fact["restarts"]))
        check(f"{name} cpu want", shown["CPU(WANT)"], fact["cpu_desired"] or "-")
        check(f"{name} cpu now", shown["CPU(NOW)"], fact["cpu_actual"] or "-")
        check(f"{name} node", shown["NODE"], fact["node"] or "-")
    for fact in document["pods"]:
        said = [c for c in fact["conditions"] if c["type"] == "PodScheduled" and c["status"] == "False"]
        words = ": ".join(p for p in (said[0]["reason"], said[0]["message"]) if p) if said else None
        check(f"{fact['name']} not scheduled", parsed["unscheduled"].get(fact["index"]), words)
    return wrong
