"""The runnel-dashboard plugin: adds ``runnel dashboard`` (the web server is imported only
when the command runs, since every ``runnel`` command loads its plugins)."""

from __future__ import annotations

from runnel.plugins import hookimpl


@hookimpl
def runnel_commands(cli):
    from runnel_dashboard.cli import dashboard

    cli.add_command(dashboard)
