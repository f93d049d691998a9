"""The ``runnel`` command line."""

from __future__ import annotations

import click

from runnel import __version__
from runnel.cli.processor import processor
from runnel.cli.send import send, sendmany
from runnel.cli.worker import worker


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="runnel")
def cli() -> None:
    """Runnel: partitioned, ordered event processing on Redis Streams."""


cli.add_command(worker)
cli.add_command(send)
cli.add_command(sendmany)
cli.add_command(processor)


def main() -> None:
    from runnel.plugins.manager import plugin_manager

    plugin_manager().hook.runnel_commands(cli=cli)
    cli(prog_name="runnel")
