"""Which burst plugins are installed: the entry points of group `miniclusters.burst_plugins`.

The spec's `flux.bursting.plugins[].name` names one (burst_rules.py checks it); bursting/discovery.py loads them.
"""

from __future__ import annotations

from importlib.metadata import entry_points

BURST_PLUGIN_GROUP = "miniclusters.burst_plugins"


def installed_burst_plugins() -> list[str]:
    """Every installed plugin, `local` first then alphabetical (the default selector's order)."""
    found = {ep.name for ep in entry_points(group=BURST_PLUGIN_GROUP)}
    return sorted(found, key=lambda name: (name != "local", name))
