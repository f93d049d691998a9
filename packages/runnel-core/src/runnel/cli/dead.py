"""``runnel dead list|replay|purge MODULE:STREAM``: a stream's dead letters.

They are what :class:`~runnel.middleware.dead_letter.DeadLetterMiddleware` forwarded to
the sink stream ``dead.{stream}``. Replaying sends each event's stored bytes, untouched,
back to the partition it failed on, then deletes it from the sink.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from runnel.cli.common import load, load_plugins, plugin_option, run, yes_option
from runnel.exceptions import RunnelError
from runnel.store.backend import admin_of
from runnel.store.log import PartitionId
from runnel.stream import DATA, Stream
from runnel.types import Partition

PAGE = 500


@dataclass
class DeadLetter:
    id: bytes  # in the sink
    partition: Partition | None  # where it failed (None: a partition the stream no longer has)
    source_id: str | None  # its id there (unknown for primitive streams)
    failed_at: datetime
    error: str
    fields: dict[bytes, bytes]  # exactly what to append to the source partition again


@click.group()
def dead() -> None:
    """List, replay or purge a stream's dead letters (DeadLetterMiddleware's sink)."""


def _when(value: str | None) -> datetime | None:
    """An ISO 8601 time (UTC unless it says otherwise) or an age such as 30m, 2h, 7d."""
    if value is None:
        return None
    age = re.fullmatch(r"(\d+)([smhd])", value.strip())
    if age:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[age[2]]
        return datetime.now(UTC) - timedelta(**{unit: int(age[1])})
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither a time (2024-05-01T12:00) nor an age (30m, 2h, 7d)"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def filters(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        [
            click.argument("target", metavar="MODULE:STREAM"),
            click.option("--since", help="Only those that failed at or after this time or age."),
            click.option("--until", help="Only those that failed before this time or age."),
            click.option("--partition", "number", type=int, help="Only those from this partition."),
            click.option(
                "--error", "text", help="Only those whose error contains TEXT (any case)."
            ),
            plugin_option,
        ]
    ):
        command = option(command)
    return command


@dataclass
class Selection:
    stream: Stream
    sink: PartitionId
    since: datetime | None
    until: datetime | None
    number: int | None
    text: str | None

    def keeps(self, letter: DeadLetter) -> bool:
        number = letter.partition.number if letter.partition else None
        return (
            (self.since is None or letter.failed_at >= self.since)
            and (self.until is None or letter.failed_at < self.until)
            and (self.number is None or number == self.number)
            and (self.text is None or self.text.lower() in letter.error.lower())
        )


def _select(
    target: str, since: str | None, until: str | None, number: int | None, text: str | None
) -> Selection:
    stream = load(target, Stream)
    if number is not None and not 0 <= number < stream.partition_count:
        raise click.ClickException(
            f"--partition {number}: {stream.name} has partitions 0 to {stream.partition_count - 1}"
        )
    sink = PartitionId(stream.app.name, f"dead.{stream.name}", 0)
    try:
        return Selection(stream, sink, _when(since), _when(until), number, text)
    except click.BadParameter as exc:
        raise click.ClickException(exc.message) from None


async def _letters(selection: Selection) -> list[DeadLetter]:
    admin = admin_of(selection.stream.app.store)
    found: list[DeadLetter] = []
    after: bytes | None = None
    while True:
        page = await admin.scan(selection.sink, after, PAGE)
        for sink_id, fields in page:
            letter = _parse(selection.stream, sink_id, fields)
            if selection.keeps(letter):
                found.append(letter)
        if len(page) < PAGE:
            return found
        after = page[-1][0]


def _parse(stream: Stream, sink_id: bytes, fields: dict[bytes, bytes]) -> DeadLetter:
    millis = int(sink_id.split(b"-")[0])
    stored_at = datetime.fromtimestamp(millis / 1000, UTC)
    if stream.record.is_primitive():
        # The sink holds exact copies: their key routes them as it did the first time.
        try:
            partition: Partition | None = stream.partition_for(stream.decode(fields))
        except Exception:  # user data that no longer decodes: no partition then
            partition = None
        return DeadLetter(sink_id, partition, None, stored_at, "", dict(fields))
    by_key = {p.key: p for p in stream.partitions}
    text = {k.decode(): v.decode(errors="replace") for k, v in fields.items() if k != DATA}
    try:
        failed_at = datetime.fromisoformat(text.get("failed_at", ""))
    except ValueError:
        failed_at = stored_at
    return DeadLetter(
        sink_id,
        by_key.get(text.get("partition", "")),
        text.get("xid"),
        failed_at,
        text.get("error", ""),
        {DATA: fields.get(DATA, b"")},
    )


def _lines(letters: list[DeadLetter]) -> Iterator[str]:
    for letter in letters:
        where = "?" if letter.partition is None else letter.partition.number
        yield (
            f"{letter.id.decode()}  partition {where}  id {letter.source_id or '-'}  "
            f"{letter.failed_at.isoformat(timespec='seconds')}  {letter.error or '-'}"
        )


@dead.command(name="list")
@filters
@yes_option("list")
def list_(
    target: str,
    since: str | None,
    until: str | None,
    number: int | None,
    text: str | None,
    plugins: tuple[str, ...],
    yes: bool,
) -> None:
    """List the dead letters of MODULE:STREAM: sink id, partition, original id, failure
    time and error."""
    load_plugins(plugins)
    selection = _select(target, since, until, number, text)
    letters = run(_letters(selection), selection.stream.app)
    for line in _lines(letters):
        click.echo(line)
    click.echo(f"{len(letters)} dead letters", err=True)


@dead.command()
@filters
@yes_option("replay")
def replay(
    target: str,
    since: str | None,
    until: str | None,
    number: int | None,
    text: str | None,
    plugins: tuple[str, ...],
    yes: bool,
) -> None:
    """Send the chosen dead letters back to the partitions they failed on, as stored (not
    re-encoded), and remove them from the sink."""
    load_plugins(plugins)
    selection = _select(target, since, until, number, text)
    stream = selection.stream

    async def replay_all() -> int:
        letters = await _letters(selection)
        lost = [x for x in letters if x.partition is None]
        if lost:
            raise RunnelError(
                f"{len(lost)} dead letters name no partition of {stream.name} "
                f"(first {lost[0].id.decode()}); nothing replayed"
            )
        admin = admin_of(stream.app.store)
        for start in range(0, len(letters), PAGE):
            chunk = letters[start : start + PAGE]
            entries = [(x.partition.id, x.fields) for x in chunk if x.partition is not None]
            await stream.append(entries)
            await admin.remove(selection.sink, [x.id for x in chunk])
        return len(letters)

    count = run(replay_all(), stream.app)
    click.echo(f"replayed {count} dead letters to {stream.name}")


@dead.command()
@filters
@yes_option(None)
def purge(
    target: str,
    since: str | None,
    until: str | None,
    number: int | None,
    text: str | None,
    plugins: tuple[str, ...],
    yes: bool,
) -> None:
    """Delete the chosen dead letters for good (asks first unless --yes)."""
    load_plugins(plugins)
    selection = _select(target, since, until, number, text)
    stream = selection.stream
    letters = run(_letters(selection), stream.app)
    if not letters:
        click.echo("no dead letters to purge")
        return
    if not yes and not click.confirm(
        f"delete {len(letters)} dead letters of {stream.name} for good?", err=True
    ):
        raise click.ClickException("nothing purged")

    async def purge_all() -> int:
        ids = [x.id for x in letters]
        return sum(
            [
                await admin_of(stream.app.store).remove(selection.sink, ids[i : i + PAGE])
                for i in range(0, len(ids), PAGE)
            ]
        )

    count = run(purge_all(), stream.app)
    click.echo(f"purged {count} dead letters of {stream.name}")
