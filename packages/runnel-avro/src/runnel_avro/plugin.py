"""The runnel-avro plugin: the ``avro`` serializer and the ``runnel avro`` commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runnel.plugins import hookimpl

if TYPE_CHECKING:
    import click

    from runnel.interfaces import Compressor
    from runnel.plugins.hookspecs import RegisterSerializer
    from runnel_avro.serializer import AvroSerializer


def avro_serializer(compressor: Compressor | None = None) -> AvroSerializer:
    """The serializer, imported when first asked for: every installed plugin is loaded as
    soon as any serializer is resolved, and a worker that never uses Avro should not pay
    for importing fastavro at its start."""
    from runnel_avro.serializer import AvroSerializer

    return AvroSerializer(compressor=compressor)


@hookimpl
def runnel_serializers(register: RegisterSerializer) -> None:
    register("avro", avro_serializer)


@hookimpl
def runnel_commands(cli: click.Group) -> None:
    from runnel_avro.cli import avro

    cli.add_command(avro)
