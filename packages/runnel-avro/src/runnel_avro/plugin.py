"""The runnel-avro plugin: the ``avro`` serializer and the ``runnel avro`` commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runnel.plugins import hookimpl
from runnel_avro.serializer import AvroSerializer

if TYPE_CHECKING:
    import click

    from runnel.plugins.hookspecs import RegisterSerializer


@hookimpl
def runnel_serializers(register: RegisterSerializer) -> None:
    register("avro", AvroSerializer)


@hookimpl
def runnel_commands(cli: click.Group) -> None:
    from runnel_avro.cli import avro

    cli.add_command(avro)
