"""The runnel-spark plugin: the ``runnel spark`` commands (PySpark is imported only when run)."""

from __future__ import annotations

from runnel.plugins import hookimpl


@hookimpl
def runnel_commands(cli):
    from runnel_spark.cli import spark

    cli.add_command(spark)
