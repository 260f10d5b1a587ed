"""The `minicluster` command line. Each module adds one group of commands to `main`."""

from __future__ import annotations

import click

from miniclusters import __version__
from miniclusters.cli import (
    autoscale_commands,
    burst_commands,
    campaign_commands,
    cluster_commands,
    model_commands,
    multiplex_commands,
    operator_commands,
    profile_commands,
    rest_commands,
    save_commands,
    simulate_commands,
    spec_commands,
    users_commands,
)
from miniclusters.cli.interrupts import InterruptExits130


@click.group(cls=InterruptExits130, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="minicluster")
def main() -> None:
    """Run Flux MiniClusters on Kubernetes or on this machine.

    \b
    Example:
      minicluster validate examples/hello.yaml
      minicluster render examples/hello.yaml | kubectl apply -f -
    """


for command in (spec_commands.validate, spec_commands.render, spec_commands.convert, spec_commands.crd):
    main.add_command(command)
for command in (*cluster_commands.COMMANDS, save_commands.save, *burst_commands.COMMANDS, *operator_commands.COMMANDS):
    main.add_command(command)

main.add_command(profile_commands.pmpi)
main.add_command(profile_commands.profile)
main.add_command(model_commands.model)
main.add_command(multiplex_commands.multiplex)
main.add_command(simulate_commands.simulate)
main.add_command(autoscale_commands.autoscale)
for command in (rest_commands.jobs, rest_commands.submit, rest_commands.cancel):
    main.add_command(command)
main.add_command(users_commands.users)
main.add_command(campaign_commands.campaign)

__all__ = ["main"]
