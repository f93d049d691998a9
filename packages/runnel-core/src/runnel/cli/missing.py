"""Commands that plugins provide, standing in until the plugin is installed: running one
says what to install instead of click's bare "No such command"."""

from __future__ import annotations

import click

_ANY_ARGS = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


def plugin_command(name: str, extra: str, summary: str) -> click.Command:
    """A ``runnel NAME`` that fails with one line naming the extra to install."""

    @click.command(name=name, context_settings=_ANY_ARGS, add_help_option=False)
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def stub(args: tuple[str, ...]) -> None:
        raise click.ClickException(
            f"`runnel {name}` comes with the runnel-{extra} plugin, which is not installed: "
            f"install runnel[{extra}] (from a checkout: pip install -e packages/runnel-{extra})"
        )

    stub.help = f"{summary} (needs the runnel-{extra} plugin)."
    stub.short_help = stub.help
    return stub


dashboard = plugin_command("dashboard", "dashboard", "A live web page of the app")
