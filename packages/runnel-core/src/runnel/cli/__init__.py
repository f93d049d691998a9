"""The ``runnel`` command line."""

from __future__ import annotations

import sys

import click

from runnel import __version__, commands
from runnel.cli.acl import acl
from runnel.cli.dead import dead
from runnel.cli.jobs import jobs
from runnel.cli.missing import avro, dashboard, spark
from runnel.cli.plugins import plugins
from runnel.cli.processor import processor
from runnel.cli.send import send, sendmany
from runnel.cli.status import status
from runnel.cli.table import table
from runnel.cli.worker import worker
from runnel.commands import load_plugins, plugin_option


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="runnel")
@plugin_option
@click.option("--traceback", "show_stack", is_flag=True, help="Print the whole stack of any error.")
def cli(plugins: tuple[str, ...], show_stack: bool) -> None:
    """Runnel: partitioned, ordered event processing and a job queue on Redis Streams."""
    commands.show_traceback = show_stack
    # main() loaded these already, so that their commands exist; this covers other callers.
    load_plugins(plugins)


def _plugin_args(argv: list[str]) -> list[str]:
    found = []
    for i, arg in enumerate(argv):
        if arg == "--plugin" and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif arg.startswith("--plugin="):
            found.append(arg.split("=", 1)[1])
    return found


cli.add_command(worker)
cli.add_command(send)
cli.add_command(sendmany)
cli.add_command(processor)
cli.add_command(status)
cli.add_command(plugins)
cli.add_command(jobs)
cli.add_command(dead)
cli.add_command(table)
cli.add_command(acl)
# Replaced by the plugins' own commands where those are installed.
cli.add_command(avro)
cli.add_command(spark)
cli.add_command(dashboard)


def main() -> None:
    from runnel.plugins.manager import add_commands, load_plugin

    # Plugins named with --plugin may add commands, so load them before parsing.
    for name in _plugin_args(sys.argv[1:]):
        try:
            load_plugin(name, source="--plugin")
        except Exception as exc:  # a plugin's own code failed to import
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)
    try:
        add_commands(cli)
    except Exception as exc:  # a plugin's command registration failed
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    cli(prog_name="runnel")
