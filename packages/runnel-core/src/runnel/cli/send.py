"""``runnel send`` and ``runnel sendmany``: validate everything first, then send."""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from typing import Any, BinaryIO, cast

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
from runnel.store.identity import Appended, Identity, KeyedIdentity, SequencedIdentity, key_bytes
from runnel.stream import Stream
from runnel.text import plural, runs

CHUNK = 1000
"""Events per round trip for sendmany; each chunk is written atomically."""

PROGRESS_MIN = 10_000
"""Show progress on a terminal from this many events (validating: from this many lines)."""

SHOW_EVERY = 1000
"""Lines between two redraws of the validating progress."""

BLOCK = 1 << 20
"""Bytes read at a time: what the input costs in memory, whatever its size."""

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
@click.option(
    "--key-field",
    metavar="NAME",
    help="Know a line sent before by its record's field NAME (one key per line), "
    "not by its content and place in the input.",
)
@click.option(
    "--no-identity",
    is_flag=True,
    help="Send without identities: running again sends every line again.",
)
@plugin_option
def sendmany(
    target: str,
    source: str,
    key_field: str | None,
    no_identity: bool,
    plugins: tuple[str, ...],
) -> None:
    """Send the events of a JSON-lines file (one JSON object per line; - for stdin).

    Every line is validated before anything is sent: on a bad line nothing is sent.
    Run again after an interruption, it sends only the lines not yet in the stream.
    """
    if key_field is not None and no_identity:
        raise click.UsageError("--key-field and --no-identity cannot go together")
    load_plugins(plugins)
    stream = load(target, Stream)
    key = None if no_identity else key_field or stream.idempotency_key
    if key is not None and key not in stream.record.model_fields:
        fields = ", ".join(stream.record.model_fields)
        raise click.ClickException(
            f"--key-field {key!r}: {stream.record.__name__} has no such field "
            f"(its fields: {fields})"
        )
    with _Input(source) as given:
        progress = _validate(stream, given, key)
        names = _Names(stream, given.digest.hexdigest(), key, no_identity)
        try:
            sent = run(
                _send_all(stream, progress, _chunks(stream, given, progress), names),
                stream.app,
            )
        except KeyboardInterrupt:
            # A second Ctrl-C, which ends the event loop: what is confirmed, and the chunk
            # whose reply it cut short (if any) as in doubt.
            raise click.ClickException(progress.interrupted()) from None
    skipped = f", skipped {progress.skipped} already sent" if progress.skipped else ""
    click.echo(
        f"sent {plural(sent - progress.skipped, 'event')} to {stream.name}{skipped}", err=True
    )


class _Names:
    """Each chunk's identity: by default its lines' numbers, under a producer named after
    the app, the stream and the input's content (the same input sent again is the same
    producer, whose numbers its partitions already hold); or each record's key field;
    or none (``--no-identity``)."""

    def __init__(self, stream: Stream, digest: str, key: str | None, off: bool) -> None:
        self.key = key
        self.off = off
        named = hashlib.sha256()
        for part in (stream.app.name.encode(), stream.name.encode(), digest.encode()):
            named.update(b"%d:%b" % (len(part), part))
        self.producer = "sendmany:" + named.hexdigest()[:24]

    def __call__(self, records: list[Any], numbers: list[int]) -> Identity | None:
        if self.off:
            return None
        if self.key is not None:
            return KeyedIdentity([key_bytes(getattr(r, self.key)) for r in records])
        return SequencedIdentity(self.producer, numbers)


def _validate(stream: Stream, given: _Input, key: str | None = None) -> _Progress:
    """The first reading: every line parsed and validated, none kept; where each chunk
    starts, for messages. With a key field, every line must give it a value (a line
    without one could not be known when sent again). Ctrl-C here says that nothing was
    sent."""
    starts: list[int] = []
    count = 0
    shown = _Shown(given.size)
    checked = 0
    try:
        for number, raw in given.lines():
            shown.at(number, given.read)
            line = _text(number, raw)
            if line.strip():
                record = _parse(stream, line, f"line {number}: ")
                if key is not None:
                    _has_key(record, key, number)
                if count % CHUNK == 0:
                    starts.append(number)
                count += 1
            checked = number
    except KeyboardInterrupt:
        raise click.ClickException(
            f"interrupted while validating, after {plural(checked, 'line')}: nothing was sent"
        ) from None
    finally:
        shown.done()
    if not count:
        raise click.ClickException("no events to send (the input is empty)")
    return _Progress(count, starts)


def _has_key(record: Any, key: str, number: int) -> None:
    if key not in record.model_fields_set:
        missing = "missing"
    elif getattr(record, key) is None:
        missing = "null"
    else:
        return
    raise click.ClickException(
        f"line {number}: {key}, the field that tells lines sent before, is {missing}"
    )


def _chunks(
    stream: Stream, given: _Input, progress: _Progress
) -> Iterator[tuple[list[Any], list[int]]]:
    """The second reading: the records again, a chunk at a time, with their lines. A line
    that no longer validates (the file changed since) stops the send where it is."""
    records: list[Any] = []
    numbers: list[int] = []
    seen = 0
    for number, raw in given.lines(again=True):
        try:
            line = _text(number, raw)
            if not line.strip():
                continue
            seen += 1
            if seen > progress.total:
                raise click.ClickException(f"line {number} is one event more than validated")
            records.append(_parse(stream, line, f"line {number}: "))
        except click.ClickException as exc:
            raise _Changed(exc.message) from None
        numbers.append(number)
        if len(records) == CHUNK:
            yield records, numbers
            records, numbers = [], []
    if records:
        yield records, numbers
    if seen < progress.total:
        raise _Changed(f"it ends after {plural(seen, 'event')}")


class _Changed(Exception):
    """The second reading does not find what the first validated (a file changed between
    the two): the send stops after the chunks before it."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what

    def message(self, progress: _Progress) -> str:
        first = progress.first_unsent
        where = f" (the first unsent is line {first})" if first is not None else ""
        return (
            f"{progress.head(FAILED)}{where}: the input changed after it was validated: {self.what}"
        )


class _Progress:
    """How many records there are, how many of them Redis has confirmed, and how many more
    are in the chunk sent but not answered (with their lines): what a message must name."""

    def __init__(self, total: int, starts: list[int]) -> None:
        self.total = total
        self.starts = starts  # the line of each chunk's first record, for messages
        self.numbers: list[int] = []  # the lines of the chunk in flight
        self.sent = 0
        self.skipped = 0  # of the sent: in the stream already, not appended again
        self.in_flight = 0

    def head(self, what: str) -> str:
        """``interrupted after sending 3000 of 12000 events``, or ``sending failed after``."""
        return f"{what} {self.sent} of {plural(self.total, 'event')}"

    def interrupted(self, unanswered: str = "interrupted again before the reply to") -> str:
        """What Redis holds: confirmed, and (if a chunk is unanswered) the lines in doubt."""
        if not self.in_flight:
            return f"{self.head(INTERRUPTED)} (the first unsent is line {self.first_unsent})"
        return f"{self.head(INTERRUPTED)}; {self.in_doubt(unanswered)}"

    @property
    def first_unsent(self) -> int | None:
        """The line of the first record not sent (None once every record is)."""
        return self.starts[self.sent // CHUNK] if self.sent < self.total else None

    def in_doubt(self, unanswered: str, why: str = "") -> str:
        """The lines of the chunk in flight, which may or may not have gone in."""
        after = self.sent + self.in_flight
        first, last = self.numbers[0], self.numbers[-1]
        lines = f"line {first}" if first == last else f"lines {first} to {last}"
        rest = (
            f"the first line surely unsent is line {self.starts[after // CHUNK]}"
            if after < self.total
            else "no line after them was sent"
        )
        return f"{unanswered} {lines}{why}, so they may or may not be in Redis ({rest})"


class _Input:
    """The input, read twice: a regular file is opened again; standard input or a pipe is
    copied to a temporary file during the first reading. Lines end as bytes.splitlines
    ends them (\\n, \\r\\n or \\r)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.spool: BinaryIO | None = None
        self.size: int | None = None
        """The input's size in bytes when known (a regular file), for the progress shown."""
        self.read = 0
        self.digest = hashlib.sha256()
        """The input's bytes as the first reading read them: what it is known by."""
        try:
            info = None if source == "-" else os.stat(source)
        except OSError as exc:
            raise click.ClickException(f"cannot read {source}: {exc.strerror}") from None
        if info is not None and stat.S_ISREG(info.st_mode):
            self.size = info.st_size
        else:
            self.spool = tempfile.TemporaryFile(prefix="runnel-sendmany-")

    def __enter__(self) -> _Input:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.spool is not None:
            self.spool.close()

    def _open(self, again: bool) -> io.BufferedIOBase:
        if again and self.spool is not None:
            self.spool.seek(0)
            return cast(io.BufferedIOBase, self.spool)
        if self.source == "-":
            return cast(io.BufferedIOBase, sys.stdin.buffer)
        try:
            return open(self.source, "rb")  # closed by lines()
        except OSError as exc:
            raise click.ClickException(f"cannot read {self.source}: {exc.strerror}") from None

    def lines(self, again: bool = False) -> Iterator[tuple[int, bytes]]:
        """Each line with its number (from 1), without its line ending."""
        f = self._open(again)
        copy = self.spool if not again else None
        number = 0
        rest = b""
        try:
            while True:
                try:
                    block = f.read1(BLOCK)  # what is there: a pipe may hold less
                except OSError as exc:
                    raise click.ClickException(
                        f"cannot read {self.source}: {exc.strerror}"
                    ) from None
                if not block:
                    break
                self.read += len(block)
                if not again:
                    self.digest.update(block)
                if copy is not None:
                    copy.write(block)
                parts = (rest + block).splitlines(keepends=True)
                # A last part that does not end in \n may go on in the next block (a \r
                # too: it may be the first half of \r\n).
                rest = b"" if parts[-1].endswith(b"\n") else parts.pop()
                for part in parts:
                    number += 1
                    yield number, _unended(part)
            if rest:
                yield number + 1, _unended(rest)
        finally:
            if f is not self.spool and f is not sys.stdin.buffer:
                f.close()
            if copy is not None:
                copy.flush()


def _text(number: int, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise click.ClickException(f"line {number}: not valid UTF-8") from None


def _unended(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return line[:-2]
    return line[:-1] if line.endswith((b"\n", b"\r")) else line


class _Shown:
    """The first reading's progress on stderr, when it is a terminal and the input has
    PROGRESS_MIN lines or more: one line, redrawn, then erased."""

    def __init__(self, size: int | None) -> None:
        self.size = size
        self.on = sys.stderr.isatty()
        self.drawn = False

    def at(self, number: int, read: int) -> None:
        if not self.on or number < PROGRESS_MIN or number % SHOW_EVERY:
            return
        share = f" ({100 * read // self.size}%)" if self.size else ""
        sys.stderr.write(f"\rvalidating: line {number}{share}")
        sys.stderr.flush()
        self.drawn = True

    def done(self) -> None:
        if self.drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.drawn = False


async def _send_all(
    stream: Stream,
    progress: _Progress,
    chunks: Iterator[tuple[list[Any], list[int]]],
    names: _Names,
) -> int:
    if not names.off and not stream.app.store.log.identities:
        raise click.ClickException(
            f"the store of {stream.name} cannot tell lines sent before (it takes no "
            "identities): give --no-identity to send every line"
        )
    show = sys.stderr.isatty() and progress.total >= PROGRESS_MIN
    with (
        click.progressbar(length=progress.total, label="sending", file=sys.stderr)
        if show
        else _Null() as bar
    ):
        changed: _Changed | None = None
        try:
            following = next(chunks, None)
        except _Changed as exc:
            raise click.ClickException(exc.message(progress)) from None
        while following is not None:
            chunk, progress.numbers = following
            # Its own task: Ctrl-C cancels this one, never the send, whose reply alone
            # says whether the chunk went in (redis-py, cancelled, may also lose the
            # cancellation and carry on).
            sending = asyncio.ensure_future(_send(stream, chunk, names(chunk, progress.numbers)))
            progress.in_flight = len(chunk)
            interrupted = False
            try:
                await asyncio.sleep(0)  # the chunk is encoded and written ...
                try:  # ... and the next one read while Redis runs this one
                    following = next(chunks, None)
                except _Changed as exc:
                    following, changed = None, exc
                await asyncio.wait({sending})
            except asyncio.CancelledError:  # Ctrl-C
                interrupted = True
                await _settle(sending, progress)
            try:
                appended = sending.result()
            except Exception as exc:
                raise click.ClickException(_failed(stream, progress, exc, interrupted)) from None
            progress.sent += len(chunk)
            progress.skipped += appended.duplicates
            progress.in_flight = 0
            bar.update(len(chunk))
            if interrupted:
                raise click.ClickException(progress.interrupted())
            if changed is not None:
                raise click.ClickException(changed.message(progress))
    return progress.sent


async def _send(stream: Stream, chunk: list[Any], identity: Identity | None) -> Appended:
    if identity is None:  # --no-identity: as `runnel send` sends (its call's identity)
        return await stream.send(*chunk)
    return await stream.send_entries(stream.entries(chunk), identity=identity)


async def _settle(sending: asyncio.Future[Any], progress: _Progress) -> None:
    """Wait a little for the reply to the chunk in flight, so that an interrupt names
    what Redis holds; without one in time, name the lines in doubt."""
    await asyncio.wait({sending}, timeout=SETTLE)
    if not sending.done():
        await cancel_and_wait([sending])
        raise click.ClickException(
            progress.interrupted(f"no reply came within {SETTLE:g} s for")
        ) from None


def _failed(stream: Stream, progress: _Progress, exc: Exception, interrupted: bool) -> str:
    """Where to resume after the chunk in flight failed: what is surely in, and the lines
    in doubt when the chunk may have been written before the failure."""
    reason = failure(stream.app, exc)  # a bug is raised again, with its traceback
    numbers = progress.numbers
    if isinstance(exc, PartlySent) and exc.sent:  # some partitions' parts went in
        return (
            f"{progress.head(FAILED)}; of the next {progress.in_flight} (lines "
            f"{numbers[0]} to {numbers[-1]}) only lines "
            f"{runs([numbers[i] for i in exc.sent])} are in Redis: {reason}"
        )
    if isinstance(exc, Unavailable) and not isinstance(exc, NotConnected):
        # Written, perhaps, then the reply was lost (a timeout, a dropped connection).
        if interrupted:
            doubt = progress.in_doubt(NO_REPLY, f" ({reason})")
            return f"{progress.head(INTERRUPTED)}; {doubt}"
        return f"{progress.head(FAILED)}; {progress.in_doubt(NO_REPLY)}: {reason}"
    return f"{progress.head(FAILED)} (the first unsent is line {numbers[0]}): {reason}"


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
