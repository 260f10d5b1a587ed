"""The `minicluster` command line. Each module holds one group of verbs; a verb's module is imported only when that
verb runs (miniclusters/cli/lazy.py), so `minicluster status` does not pay for the simulator or the REST client."""

from __future__ import annotations

import click

from miniclusters import __version__
from miniclusters.cli.lazy import LazyGroup

_CLI = "miniclusters.cli"
VERBS: dict[str, str] = {
    **{name: f"{_CLI}.spec_commands:{name}" for name in ("validate", "render", "convert", "crd")},
    "up": f"{_CLI}.up_command:up",
    **{name: f"{_CLI}.cluster_commands:{name}" for name in ("down", "status", "scale", "resize", "logs")},
    "exec": f"{_CLI}.cluster_commands:exec_",
    "list": f"{_CLI}.cluster_commands:list_",
    "save": f"{_CLI}.save_commands:save",
    "burst": f"{_CLI}.burst_commands:burst",
    "operator": f"{_CLI}.operator_commands:operator",
    "manifests": f"{_CLI}.operator_commands:manifests",
    "pmpi": f"{_CLI}.profile_commands:pmpi",
    "profile": f"{_CLI}.profile_commands:profile",
    "model": f"{_CLI}.model_commands:model",
    "multiplex": f"{_CLI}.multiplex_commands:multiplex",
    "simulate": f"{_CLI}.simulate_commands:simulate",
    "autoscale": f"{_CLI}.autoscale_commands:autoscale",
    **{name: f"{_CLI}.rest_commands:{name}" for name in ("jobs", "submit", "cancel")},
    "users": f"{_CLI}.users_commands:users",
    "campaign": f"{_CLI}.campaign_commands:campaign",
    "kube": f"{_CLI}.kube_commands:kube",
}
"""Every verb of `minicluster`, by the module that defines it."""


@click.group(
    cls=LazyGroup,
    lazy_commands=VERBS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
)
@click.version_option(__version__, prog_name="minicluster")
def main() -> None:
    """Run Flux MiniClusters on Kubernetes or on this machine.

    \b
    Example:
      minicluster validate examples/hello.yaml
      minicluster render examples/hello.yaml | kubectl apply -f -
    """


__all__ = ["VERBS", "main"]
