"""The rules of `spec.flux.bursting`: the Flux Operator's bursted clusters and our burst service's plugins.

`clusters` keeps the operator's meaning (each entry's hosts `<name>-0..size-1` join the hostlist; hosts.py), so its
examples load as written; which of our plugins the burst service may use is `plugins`, a field of ours.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from miniclusters.api.burst_plugins import installed_burst_plugins
from miniclusters.api.errors import Problem
from miniclusters.api.hosts import bursted_clusters, pod_hostname
from miniclusters.api.names import dns1123_label_error
from miniclusters.api.spec import OUR_API_VERSION

if TYPE_CHECKING:
    from miniclusters.api.spec import MiniCluster

BURSTING = "spec.flux.bursting"


def bursting_problems(mc: MiniCluster) -> Iterator[Problem]:
    bursting = mc.spec.flux.bursting
    if bursting.hostlist and bursting.clusters:  # the operator's own rule
        yield Problem(BURSTING, "give either a custom hostlist or clusters to burst to, not both")
    if bursting.hostlist and bursting.plugins and not bursting.lead_broker:
        yield Problem(
            f"{BURSTING}.plugins",
            "the burst service adds brokers to a cluster of pods; a custom hostlist replaces the pods (give one)",
        )
    yield from _clusters(mc)
    yield from _plugins(mc)


def _clusters(mc: MiniCluster) -> Iterator[Problem]:
    """Each bursted cluster's hosts are DNS labels, registered once: a host listed twice would be two ranks."""
    bursting = mc.spec.flux.bursting
    if bursting.hostlist:
        return
    # hosts `<prefix>-<i>` of two prefixes differ unless the prefixes are equal
    owners = {} if bursting.lead_broker else {mc.name: "the pods (metadata.name)"}
    for index, (name, size) in enumerate(bursted_clusters(mc)):
        path = f"{BURSTING}.clusters[{index}].name"
        error = dns1123_label_error(name)
        last = pod_hostname(name, size - 1)
        if error:
            yield Problem(path, error)
        elif len(last) > 63:
            yield Problem(path, f"its hosts reach {last!r} ({len(last)} characters); a hostname is at most 63")
        elif name in owners:
            yield Problem(path, f"{name!r}: its hosts '{name}-<i>' are already those of {owners[name]}")
        owners.setdefault(name, f"{BURSTING}.clusters[{index}]")
        if not bursting.plugins and mc.api_version == OUR_API_VERSION:
            yield from _legacy_plugin_name(mc, index, name)


def _legacy_plugin_name(mc: MiniCluster, index: int, name: str) -> Iterator[Problem]:
    """Our specs once named a burst plugin here: such a spec would now register hosts nobody brings up and run no
    burst service, so it is refused with the new spelling rather than silently meaning something else."""
    if mc.spec.flux.flavour == "builtin" and name in installed_burst_plugins():
        given = mc.spec.flux.bursting.clusters[index].size  # 0: the operator's default, spec.size; ours: no limit
        written = f"{{name: {name}, size: {given}}}" if given else f"{{name: {name}}}"
        yield Problem(
            f"{BURSTING}.clusters[{index}].name",
            f"{name!r} is a burst plugin, but clusters[] names the Flux Operator's bursted clusters (hosts "
            f"'{name}-0..' join the hostlist); to burst with the plugin write {BURSTING}.plugins: [{written}]",
        )


def _plugins(mc: MiniCluster) -> Iterator[Problem]:
    """Each plugin is installed (a name no plugin has would leave burstable jobs waiting), beside the builtin
    broker (the flux flavour bursts with the operator's static hosts only)."""
    plugins = mc.spec.flux.bursting.plugins
    if plugins and mc.spec.flux.flavour != "builtin":  # accepted and then ignored would leave jobs pending for ever
        yield Problem(
            f"{BURSTING}.plugins",
            "the burst service runs beside the builtin broker only; with flavour 'flux' burst to the Flux "
            f"Operator's static hosts ({BURSTING}.clusters or .hostlist), or use flavour 'builtin'",
        )
        return
    installed = installed_burst_plugins()
    for index, plugin in enumerate(plugins):
        if plugin.name not in installed:
            got = f"{plugin.name!r} is not" if plugin.name else "empty: it must be"
            yield Problem(
                f"{BURSTING}.plugins[{index}].name",
                f"{got} an installed burst plugin ({', '.join(installed) or 'none installed'})",
            )
