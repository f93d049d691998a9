"""``runnel send`` and ``runnel sendmany``: validate everything first, then send."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import click
from pydantic import ValidationError

from runnel.commands import (
    describe,
    failure,
    json_input,
    load,
    load_plugins,
    plugin_option,
    run,
)
from runnel.exceptions import NotConnected, PartlySent, Unavailable
from runnel.runtime.retry import cancel_and_wait
from runnel.stream import Stream
from runnel.text import plural, runs

CHUNK = 1000
"""Events per round trip for sendmany; each chunk is written atomically."""

PROGRESS_MIN = 10_000
"""Show a progress bar on a terminal from this many events."""

SETTLE = 5.0
"""Seconds Ctrl-C waits for the reply to the chunk in flight, which alone says whether
that chunk went in."""

INTERRUPTED, FAILED, NO_REPLY = (
    "interrupted after sending",
    "sending failed after",
    "no reply came for",
)


def _parse(stream: Stream, text: str, where: str) -> Any:
    try:
        value = json_input(text)
    except ValueError as exc:
        raise click.ClickException(f"{where}{exc}") from None
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
        # A second Ctrl-C, which ends the event loop: what is confirmed, and the chunk
        # whose reply it cut short (if any) as in doubt.
        raise click.ClickException(progress.interrupted()) from None
    click.echo(f"sent {plural(sent, 'event')} to {stream.name}", err=True)


class _Progress:
    """The records to send, how many of them Redis has confirmed, and how many more are
    in the chunk sent but not answered: what a message must name."""

    def __init__(self, records: list[Any], numbers: list[int]) -> None:
        self.records = records
        self.numbers = numbers  # the line of each record, for messages
        self.sent = 0
        self.in_flight = 0

    def head(self, what: str) -> str:
        """``interrupted after sending 3000 of 12000 events``, or ``sending failed after``."""
        return f"{what} {self.sent} of {plural(len(self.records), 'event')}"

    def interrupted(self, unanswered: str = "interrupted again before the reply to") -> str:
        """What Redis holds: confirmed, and (if a chunk is unanswered) the lines in doubt."""
        if not self.in_flight:
            return f"{self.head(INTERRUPTED)} (the first unsent is line {self.first_unsent})"
        return f"{self.head(INTERRUPTED)}; {self.in_doubt(unanswered)}"

    @property
    def first_unsent(self) -> int:
        return self.numbers[self.sent]

    def in_doubt(self, unanswered: str, why: str = "") -> str:
        """The lines of the chunk in flight, which may or may not have gone in."""
        after = self.sent + self.in_flight
        first, last = self.numbers[self.sent], self.numbers[after - 1]
        lines = f"line {first}" if first == last else f"lines {first} to {last}"
        rest = (
            f"the first line surely unsent is line {self.numbers[after]}"
            if after < len(self.records)
            else "no line after them was sent"
        )
        return f"{unanswered} {lines}{why}, so they may or may not be in Redis ({rest})"


def _lines(source: str) -> list[bytes]:
    if source == "-":
        return sys.stdin.buffer.read().splitlines()
    try:
        with open(source, "rb") as f:
            return f.read().splitlines()
    except OSError as exc:
        raise click.ClickException(f"cannot read {source}: {exc.strerror}") from None


async def _send_all(stream: Stream, progress: _Progress) -> int:
    records = progress.records
    show = sys.stderr.isatty() and len(records) >= PROGRESS_MIN
    with (
        click.progressbar(length=len(records), label="sending", file=sys.stderr)
        if show
        else _Null() as bar
    ):
        for start in range(0, len(records), CHUNK):
            chunk = records[start : start + CHUNK]
            # Its own task: Ctrl-C cancels this one, never the send, whose reply alone
            # says whether the chunk went in (redis-py, cancelled, may also lose the
            # cancellation and carry on).
            sending = asyncio.ensure_future(stream.send(*chunk))
            progress.in_flight = len(chunk)
            interrupted = False
            try:
                await asyncio.wait({sending})
            except asyncio.CancelledError:  # Ctrl-C
                interrupted = True
                await _settle(sending, progress)
            try:
                sending.result()
            except Exception as exc:
                raise click.ClickException(
                    _failed(stream, progress, start, exc, interrupted)
                ) from None
            progress.sent += len(chunk)
            progress.in_flight = 0
            bar.update(len(chunk))
            if interrupted:
                raise click.ClickException(progress.interrupted())
    return progress.sent


async def _settle(sending: asyncio.Future[Any], progress: _Progress) -> None:
    """Wait a little for the reply to the chunk in flight, so that an interrupt names
    what Redis holds; without one in time, name the lines in doubt."""
    await asyncio.wait({sending}, timeout=SETTLE)
    if not sending.done():
        await cancel_and_wait([sending])
        raise click.ClickException(
            progress.interrupted(f"no reply came within {SETTLE:g} s for")
        ) from None


def _failed(
    stream: Stream, progress: _Progress, start: int, exc: Exception, interrupted: bool
) -> str:
    """Where to resume after the chunk from ``start`` failed: what is surely in, and the
    lines in doubt when the chunk may have been written before the failure."""
    reason = failure(stream.app, exc)  # a bug is raised again, with its traceback
    numbers = progress.numbers
    if isinstance(exc, PartlySent) and exc.sent:  # some partitions' parts went in
        last = numbers[start + progress.in_flight - 1]
        return (
            f"{progress.head(FAILED)}; of the next {progress.in_flight} (lines "
            f"{numbers[start]} to {last}) only lines "
            f"{runs([numbers[start + i] for i in exc.sent])} are in Redis: {reason}"
        )
    if isinstance(exc, Unavailable) and not isinstance(exc, NotConnected):
        # Written, perhaps, then the reply was lost (a timeout, a dropped connection).
        if interrupted:
            doubt = progress.in_doubt(NO_REPLY, f" ({reason})")
            return f"{progress.head(INTERRUPTED)}; {doubt}"
        return f"{progress.head(FAILED)}; {progress.in_doubt(NO_REPLY)}: {reason}"
    first = progress.first_unsent
    return f"{progress.head(FAILED)} (the first unsent is line {first}): {reason}"


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
