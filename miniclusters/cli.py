"""The `minicluster` command line."""

import click


@click.group()
def main() -> None:
    """Run Flux MiniClusters on Kubernetes or on this machine."""
