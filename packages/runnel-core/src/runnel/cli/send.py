"""``runnel send`` and ``runnel sendmany``: validate everything first, then send."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import click
import orjson
from pydantic import ValidationError

from runnel.cli.common import describe, failure, load, load_plugins, plugin_option, run
from runnel.exceptions import PartlySent
from runnel.stream import Stream
from runnel.text import runs

CHUNK = 1000
"""Events per round trip for sendmany; each chunk is written atomically."""

PROGRESS_MIN = 10_000
"""Show a progress bar on a terminal from this many events."""


def _parse(stream: Stream, text: str, where: str) -> Any:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise click.ClickException(f"{where}malformed JSON: {exc}") from None
    if not isinstance(value, dict):
        raise click.ClickException(f"{where}expected a JSON object, got {_json_type(value)}")
    try:
        record = stream.validate(value)
    except ValidationError as exc:
        raise click.ClickException(
            f"{where}invalid {stream.record.__name__}: {describe(exc)}"
        ) from None
    return record


@click.command()
@click.argument("target", metavar="MODULE:STREAM")
@click.argument("event", metavar="JSON")
@plugin_option
def send(target: str, event: str, plugins: tuple[str, ...]) -> None:
    """Send one event, given as a JSON object, to the stream MODULE:STREAM."""
    load_plugins(plugins)
    stream = load(target, Stream)
    record = _parse(stream, event, "")
    [xid] = run(stream.send(record), stream.app)
    click.echo(xid.decode() if isinstance(xid, bytes) else xid)


@click.command()
@click.argument("target", metavar="MODULE:STREAM")
@click.argument("source", metavar="FILE.jsonl")
@plugin_option
def sendmany(target: str, source: str, plugins: tuple[str, ...]) -> None:
    """Send the events of a JSON-lines file (one JSON object per line; - for stdin).

    Every line is validated before anything is sent: on a bad line nothing is sent.
    """
    load_plugins(plugins)
    stream = load(target, Stream)
    records = []
    numbers = []  # the line of each record, for messages
    for number, raw in enumerate(_lines(source), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise click.ClickException(f"line {number}: not valid UTF-8") from None
        if not line.strip():
            continue
        records.append(_parse(stream, line, f"line {number}: "))
        numbers.append(number)
    if not records:
        raise click.ClickException("no events to send (the input is empty)")
    progress = _Progress(records, numbers)
    try:
        sent = run(_send_all(stream, progress), stream.app)
    except KeyboardInterrupt:
        # Ctrl-C that ended the event loop rather than the send (a second one, or one
        # landing outside a send): the count of confirmed events still says where to resume.
        raise click.ClickException(progress.interrupted()) from None
    click.echo(f"sent {sent} events to {stream.name}", err=True)


class _Progress:
    """The records to send, and how many of them Redis has confirmed so far."""

    def __init__(self, records: list[Any], numbers: list[int]) -> None:
        self.records = records
        self.numbers = numbers  # the line of each record, for messages
        self.sent = 0

    def interrupted(self) -> str:
        return (
            f"interrupted after sending {self.sent} of {len(self.records)} events "
            f"(the first unsent is line {self.numbers[self.sent]})"
        )


def _lines(source: str) -> list[bytes]:
    if source == "-":
        return sys.stdin.buffer.read().splitlines()
    try:
        with open(source, "rb") as f:
            return f.read().splitlines()
    except OSError as exc:
        raise click.ClickException(f"cannot read {source}: {exc.strerror}") from None


async def _send_all(stream: Stream, progress: _Progress) -> int:
    records, numbers = progress.records, progress.numbers
    show = sys.stderr.isatty() and len(records) >= PROGRESS_MIN
    with (
        click.progressbar(length=len(records), label="sending", file=sys.stderr)
        if show
        else _Null() as bar
    ):
        for start in range(0, len(records), CHUNK):
            chunk = records[start : start + CHUNK]
            sent = progress.sent
            try:
                await stream.send(*chunk)
            except (Exception, asyncio.CancelledError) as exc:  # say where to resume, then re-raise
                task = asyncio.current_task()
                if isinstance(exc, asyncio.CancelledError) or (task and task.cancelling()):
                    # Ctrl-C (which redis-py may report as a timeout): say where to resume,
                    # as for a dropped connection. The chunk in flight is one command,
                    # written whole or not at all.
                    raise click.ClickException(progress.interrupted()) from None
                reason = failure(stream.app, exc)
                if isinstance(exc, PartlySent) and exc.sent:  # some partitions' parts are in
                    last = numbers[start + len(chunk) - 1]
                    raise click.ClickException(
                        f"sending failed after {sent} of {len(records)} events; of the next "
                        f"{len(chunk)} (lines {numbers[start]} to {last}) only lines "
                        f"{runs([numbers[start + i] for i in exc.sent])} are in Redis: "
                        f"{reason}"
                    ) from None
                raise click.ClickException(
                    f"sending failed after {sent} of {len(records)} events "
                    f"(the first unsent is line {numbers[sent]}): {reason}"
                ) from None
            progress.sent += len(chunk)
            bar.update(len(chunk))
    return progress.sent


class _Null:
    def __enter__(self) -> _Null:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        pass


def _json_type(value: object) -> str:
    """The name of a decoded JSON value's type as JSON spells it (``null``, not NoneType)."""
    return "null" if value is None else type(value).__name__
