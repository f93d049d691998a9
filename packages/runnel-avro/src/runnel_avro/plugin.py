"""The runnel-avro plugin: the ``avro`` serializer and the ``runnel avro`` commands."""

from __future__ import annotations

from runnel.plugins import hookimpl
from runnel_avro.serializer import AvroSerializer


@hookimpl
def runnel_serializers(register):
    register("avro", AvroSerializer)


@hookimpl
def runnel_commands(cli):
    from runnel_avro.cli import avro

    cli.add_command(avro)
