"""Burst plugins from Python entry points (group `miniclusters.burst_plugins`), and a replaceable selector."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import cast

from bursting.plugin import BurstPlugin, LeadContext
from bursting.policy import Selector, first_able
from miniclusters.api.burst_plugins import BURST_PLUGIN_GROUP as GROUP
from miniclusters.api.burst_plugins import installed_burst_plugins as plugin_names

PluginFactory = Callable[[LeadContext], BurstPlugin]


def plugin_factories(names: list[str] | None = None) -> dict[str, PluginFactory]:
    """The factories of the named plugins (default: every installed one), loaded only when asked for."""
    found = {ep.name: ep for ep in entry_points(group=GROUP)}
    wanted = names or plugin_names()
    missing = [name for name in wanted if name not in found]
    if missing:
        raise LookupError(f"no burst plugin {', '.join(map(repr, missing))} (installed: {', '.join(found) or 'none'})")
    return {name: cast(PluginFactory, found[name].load()) for name in wanted}


def load_selector(path: str | None) -> Selector:
    """`module:function` -> that function (the user's selection policy); None -> the default."""
    if not path:
        return first_able
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise ValueError(f"--selector {path!r}: expected module:function")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--selector {path!r}: {exc}") from None
    if not callable(found):
        raise ValueError(f"--selector {path!r}: not a function")
    return cast(Selector, found)
