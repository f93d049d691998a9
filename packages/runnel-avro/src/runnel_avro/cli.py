"""``runnel avro``: see a stream's schema, what is stored, and check a change before deploying."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from runnel.commands import load, load_plugins, plugin_option, run

if TYPE_CHECKING:
    from runnel.stream import Stream
    from runnel_avro.serializer import AvroSerializer

# avro, fastavro and the app's classes are imported when a command runs, not with this
# module: the plugin adds it to every `runnel` command line.


@click.group()
def avro() -> None:
    """Avro schemas of streams."""


def _serializer(target: str) -> tuple[Stream, AvroSerializer]:
    from runnel.stream import Stream
    from runnel_avro.serializer import AvroSerializer

    stream = load(target, Stream)
    serializer = stream.serializer
    if not isinstance(serializer, AvroSerializer):
        raise click.ClickException(f"{target} is not serialized with Avro ({serializer!r})")
    return stream, serializer


@avro.command()
@click.argument("target", metavar="MODULE:STREAM")
@plugin_option
def schema(target: str, plugins: tuple[str, ...]) -> None:
    """Print the stream's Avro schema (.avsc JSON) as this code would write it."""
    load_plugins(plugins)
    _, serializer = _serializer(target)
    click.echo(json.dumps(serializer.schema, indent=2))


@avro.command()
@click.argument("target", metavar="MODULE:STREAM")
@click.option("--json", "as_json", is_flag=True, help="Print fingerprint -> schema as JSON.")
@plugin_option
def stored(target: str, as_json: bool, plugins: tuple[str, ...]) -> None:
    """List the writer schemas stored for the stream."""
    load_plugins(plugins)
    stream, serializer = _serializer(target)
    store = stream.app.store.schema_store(stream.app.name, stream.name)
    found = run(store.all(), stream.app)
    if as_json:
        click.echo(json.dumps({fp: _json_or_text(text) for fp, text in found.items()}, indent=2))
        return
    if not found:
        click.echo(f"no schemas stored for {stream.id} yet")
    for fp, text in sorted(found.items()):
        mine = "  (this code's)" if fp == serializer.fingerprint else ""
        try:
            parsed = json.loads(text)
            names = ", ".join(f["name"] for f in parsed.get("fields", []))
            click.echo(f"{fp}  {parsed.get('name')}: {names}{mine}")
        except (ValueError, TypeError, KeyError, AttributeError):
            click.echo(f"{fp}  DAMAGED: not a valid schema: {text[:60]!r}")


@avro.command()
@click.argument("target", metavar="MODULE:STREAM")
@plugin_option
def check(target: str, plugins: tuple[str, ...]) -> None:
    """Check this code's schema against the stored ones, without storing it.

    Exits 1 naming each field at fault if producing or consuming with this code would be
    refused: run it before deploying a change to a record.
    """
    from runnel_avro.compatibility import Compatibility, DamagedSchema, problems

    load_plugins(plugins)
    stream, serializer = _serializer(target)
    store = stream.app.store.schema_store(stream.app.name, stream.name)
    found = run(store.all(), stream.app)
    mode = serializer.compatibility
    faults = []
    for fp, text in sorted(found.items()):
        if fp == serializer.fingerprint:
            continue
        try:
            if mode in (Compatibility.BACKWARD, Compatibility.FULL):
                faults += [f"reading {fp}: {p}" for p in problems(serializer.schema, text)]
            if mode in (Compatibility.FORWARD, Compatibility.FULL):
                faults += [f"read by {fp}: {p}" for p in problems(text, serializer.schema)]
        except DamagedSchema as exc:
            click.echo(f"warning: stored schema {fp} is damaged and was skipped: {exc}", err=True)
    if faults:
        for fault in faults:
            click.echo(f"incompatible ({mode.value}): {fault}", err=True)
        sys.exit(1)
    state = "already stored" if serializer.fingerprint in found else "compatible"
    click.echo(
        f"{stream.id}: schema {serializer.fingerprint} is {state} "
        f"({len(found)} stored, compatibility {mode.value})"
    )


def _json_or_text(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text
