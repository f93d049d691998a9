"""A plugin that is not installed: tests load it with ``--plugin local_plugin``.

It adds the serializer ``upper-json`` (JSON with every string value upper-cased on the
way out, so its work is visible) and the command ``runnel local-hello``.
"""

from __future__ import annotations

import json
from typing import Any

import click

from runnel.interfaces import Compressor, Serializer
from runnel.plugins import hookimpl
from runnel.plugins.hookspecs import Register


def _upper(value: Any) -> Any:
    if isinstance(value, str):
        return value.upper()
    if isinstance(value, dict):
        return {k: _upper(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_upper(v) for v in value]
    return value


class UpperJSONSerializer(Serializer):
    name = "upper-json"

    def __init__(self, compressor: Compressor | None = None) -> None:
        self.compressor = compressor

    def dumps(self, value: Any) -> bytes:
        return json.dumps(_upper(value)).encode()

    def loads(self, value: bytes) -> Any:
        return json.loads(value)


@hookimpl
def runnel_serializers(register: Register) -> None:
    register("upper-json", UpperJSONSerializer)


@hookimpl
def runnel_commands(cli: click.Group) -> None:
    @cli.command("local-hello")
    def local_hello() -> None:
        """Say hello from a plugin loaded with --plugin."""
        click.echo("hello from local_plugin")
