"""The runnel-dashboard plugin: adds ``runnel dashboard`` (the web server is imported only
when the command runs, since every ``runnel`` command loads its plugins)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runnel.plugins import hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def runnel_commands(cli: click.Group) -> None:
    from runnel_dashboard.cli import dashboard

    cli.add_command(dashboard)
