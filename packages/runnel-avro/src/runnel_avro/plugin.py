"""The runnel-avro plugin: the ``avro`` serializer and the ``runnel avro`` commands.

Every ``runnel`` command loads the plugins; fastavro is imported only when a stream uses
the serializer, so that the others do not wait for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runnel.plugins import hookimpl

if TYPE_CHECKING:
    import click

    from runnel.interfaces import Compressor
    from runnel.plugins.hookspecs import RegisterSerializer
    from runnel_avro.serializer import AvroSerializer


def _avro(compressor: Compressor | None = None, **options: Any) -> AvroSerializer:
    from runnel_avro.serializer import AvroSerializer

    return AvroSerializer(compressor, **options)


@hookimpl
def runnel_serializers(register: RegisterSerializer) -> None:
    register("avro", _avro)


@hookimpl
def runnel_commands(cli: click.Group) -> None:
    from runnel_avro.cli import avro

    cli.add_command(avro)
