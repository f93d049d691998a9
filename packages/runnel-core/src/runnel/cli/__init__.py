"""The ``runnel`` command line."""

from __future__ import annotations

import sys

import click

from runnel import __version__
from runnel.cli.processor import processor
from runnel.cli.send import send, sendmany
from runnel.cli.status import status
from runnel.cli.worker import worker


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="runnel")
def cli() -> None:
    """Runnel: partitioned, ordered event processing on Redis Streams."""


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


def main() -> None:
    from runnel.plugins.manager import load_plugin, plugin_manager

    # Plugins named with --plugin may add commands, so load them before parsing.
    for name in _plugin_args(sys.argv[1:]):
        try:
            load_plugin(name)
        except Exception as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)
    plugin_manager().hook.runnel_commands(cli=cli)
    cli(prog_name="runnel")
