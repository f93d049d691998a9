"""The runnel-spark plugin: the ``runnel spark`` commands (PySpark is imported only when run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runnel.plugins import hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def runnel_commands(cli: click.Group) -> None:
    from runnel_spark.cli import spark

    cli.add_command(spark)
