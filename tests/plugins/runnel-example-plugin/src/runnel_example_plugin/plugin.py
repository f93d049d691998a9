"""The hook implementations, named by the ``runnel`` entry point in pyproject.toml."""

from __future__ import annotations

import click

from runnel.plugins import hookimpl
from runnel.plugins.hookspecs import RegisterCompressor, RegisterSerializer
from runnel_example_plugin import __version__
from runnel_example_plugin.codecs import TaggedJSONSerializer, ZlibCompressor


@hookimpl
def runnel_serializers(register: RegisterSerializer) -> None:
    register("tagged-json", TaggedJSONSerializer)


@hookimpl
def runnel_compressors(register: RegisterCompressor) -> None:
    register("example-zlib", ZlibCompressor)


@hookimpl
def runnel_commands(cli: click.Group) -> None:
    @cli.command("example-hello")
    @click.argument("name", default="world")
    def example_hello(name: str) -> None:
        """Greet NAME from the example plugin."""
        click.echo(f"hello {name} from runnel-example-plugin {__version__}")
