"""How the fake API server merges what a client sends into what it stores (JSON merge patch, strategic merge patch,
server-side apply for one field manager) and matches label selectors."""

from __future__ import annotations

import copy
from typing import Any


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: dicts merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge(target: Any, patch: Any) -> Any:
    """Strategic merge patch, as far as we use it: lists of named objects (containers) merge by name."""
    if isinstance(patch, dict):
        out = copy.deepcopy(target) if isinstance(target, dict) else {}
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = strategic_merge(out.get(key), value)
        return out
    if (
        isinstance(patch, list)
        and isinstance(target, list)
        and all(isinstance(x, dict) and "name" in x for x in [*patch, *target])
    ):
        merged = [copy.deepcopy(x) for x in target]
        for item in patch:
            for i, existing in enumerate(merged):
                if existing["name"] == item["name"]:
                    merged[i] = strategic_merge(existing, item)
                    break
            else:
                merged.append(copy.deepcopy(item))
        return merged
    return copy.deepcopy(patch)


def apply_merge(target: Any, applied: Any) -> Any:
    """Server-side apply approximated for a single field manager: applied fields win, others are kept."""
    if isinstance(applied, dict) and isinstance(target, dict):
        out = copy.deepcopy(target)
        for key, value in applied.items():
            out[key] = apply_merge(target.get(key), value)
        return out
    return copy.deepcopy(applied)


def overwrite(target: Any, source: Any) -> None:
    """`target` (a JSON object) becomes `source` in place: who holds the stored object sees the new one."""
    target.clear()
    target.update(source)


def selector_matches(labels: dict[str, str], selector: str | None) -> bool:
    """Equality-based label selectors: `a=b,c=d`, `a!=b`, `a` (exists)."""
    if not selector:
        return True
    for term in selector.split(","):
        term = term.strip()
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.strip().rstrip("=")) != value.strip():
                return False
        elif term not in labels:
            return False
    return True
