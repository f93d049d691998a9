"""Commands that plugins provide, standing in until the plugin is installed: running one
says what to install instead of click's bare "No such command"."""

from __future__ import annotations

import click

from runnel.plugins.providers import install_hint

_ANY_ARGS = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


def plugin_command(name: str, summary: str) -> click.Command:
    """A ``runnel NAME`` that fails with one line naming what to install."""
    message = install_hint("command", name, f"`runnel {name}`")
    assert message is not None, f"no provider known for the command {name!r}"

    @click.command(name=name, context_settings=_ANY_ARGS, add_help_option=False)
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def stub(args: tuple[str, ...]) -> None:
        raise click.ClickException(message)

    stub.help = f"{summary} (needs the runnel-{name} plugin)."
    stub.short_help = stub.help
    return stub


avro = plugin_command("avro", "Avro schemas of streams")
spark = plugin_command("spark", "Copy streams to files and files to streams, through Spark")
dashboard = plugin_command("dashboard", "A live web page of the app")
