"""Dead letters, chosen and changed: the job queue's dead jobs, and a stream's dead
letters (what :class:`~runnel.middleware.dead_letter.DeadLetterMiddleware` forwarded to
the sink stream ``dead.{stream}``).

Replaying a stream's dead letter sends its stored bytes, untouched, back to the
partition it failed on, then deletes it from the sink.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from runnel.admin.declarations import Declarations
from runnel.admin.jobs import iso
from runnel.exceptions import RunnelError
from runnel.jobs.model import DeadLetter
from runnel.middleware.dead_letter import DeadLetterMiddleware, letter_partition
from runnel.store.backend import admin_of
from runnel.store.log import PartitionId
from runnel.stream import DATA, Stream
from runnel.text import plural
from runnel.types import Partition

PAGE = 500
"""Sink entries read, appended or removed per call."""


class NotFound(RunnelError):
    """A selection names what is not there (a job name, a dead job's id, a partition):
    the message says which, and nothing was changed."""


# The job queue's dead jobs


async def select_dead_jobs(
    app: Declarations, job_name: str | None, job_ids: tuple[str, ...]
) -> list[DeadLetter]:
    """The dead jobs chosen by name and ids (all without either); a name or id that
    matches nothing is :class:`NotFound` naming it."""
    letters = await app.job_store.dead_letters()
    chosen = [
        d
        for d in letters
        if (job_name is None or d.name == job_name) and (not job_ids or d.id in job_ids)
    ]
    if job_name is not None and not chosen and job_name not in app.jobs:
        raise NotFound(
            f"app {app.name} has no job named {job_name!r} and no dead jobs of that name "
            f"(its jobs: {', '.join(sorted(app.jobs)) or 'none'})"
        )
    missing = sorted(set(job_ids) - {d.id for d in chosen})
    if missing:
        raise NotFound(
            f"no dead job with id {', '.join(repr(m) for m in missing)}"
            + (f" named {job_name!r}" if job_name else "")
            + f" in app {app.name}"
        )
    return chosen


async def oldest_dead_jobs(app: Declarations, limit: int) -> list[DeadLetter]:
    """At most ``limit`` dead jobs, the oldest first."""
    return await app.job_store.dead_letters(limit)


def dead_job_rows(letters: list[DeadLetter]) -> list[dict[str, Any]]:
    """What ``runnel jobs dead list --json`` prints of them."""
    return [
        {"id": d.id, "name": d.name, "queue": d.queue, "error": d.error, "died": iso(d.at)}
        for d in letters
    ]


# A stream's dead letters


@dataclass
class StreamDeadLetter:
    id: bytes  # in the sink
    partition: Partition | None  # where it failed (None: a partition the stream no longer has)
    source_id: str | None  # its id there (unknown for primitive streams)
    failed_at: datetime
    error: str
    fields: dict[bytes, bytes]  # exactly what to append to the source partition again


def sinks(app: Declarations) -> list[tuple[Stream, Stream]]:
    """(source, sink) for each stream of the app with a dead-letter sink ``dead.{source}``."""
    return [
        (stream, app.streams[f"dead.{name}"])
        for name, stream in sorted(app.streams.items())
        if f"dead.{name}" in app.streams
    ]


def forwarding_processors(app: Declarations, stream: Stream) -> list[str]:
    """The names of the processors that forward the failed events of ``stream`` to its
    sink (a DeadLetterMiddleware of it): a letter does not record which one failed."""
    return sorted(
        proc.name
        for proc in app.processors.values()
        if any(isinstance(m, DeadLetterMiddleware) and m.source is stream for m in proc.middleware)
    )


def check_partition(stream: Stream, number: int | None) -> None:
    """A partition asked for by number must be one the stream has."""
    if number is not None and not 0 <= number < stream.partition_count:
        raise NotFound(
            f"--partition {number}: {stream.name} has partitions 0 to {stream.partition_count - 1}"
        )


@dataclass
class Selection:
    """Which dead letters of a stream: all those that failed in [since, until), on
    partition ``number``, with ``text`` in their error (any case), of the sink ids
    ``ids`` (as the dashboard's buttons name them); None: any."""

    stream: Stream
    since: datetime | None
    until: datetime | None
    number: int | None
    text: str | None
    ids: frozenset[str] | None = None

    @property
    def sink(self) -> PartitionId:
        return PartitionId(self.stream.app.name, f"dead.{self.stream.name}", 0)

    def keeps(self, letter: StreamDeadLetter) -> bool:
        number = letter.partition.number if letter.partition else None
        return (
            (self.since is None or letter.failed_at >= self.since)
            and (self.until is None or letter.failed_at < self.until)
            and (self.number is None or number == self.number)
            and (self.text is None or self.text.lower() in letter.error.lower())
            and (self.ids is None or letter.id.decode() in self.ids)
        )


async def stream_dead_letters(
    selection: Selection, limit: int | None = None
) -> list[StreamDeadLetter]:
    """The selected dead letters, in the sink's order (oldest first); at most ``limit``
    of them (the oldest), so that a page can show a sink of any size."""
    admin = admin_of(selection.stream.app.store)
    found: list[StreamDeadLetter] = []
    after: bytes | None = None
    while True:
        page = await admin.scan(selection.sink, after, PAGE)
        for sink_id, fields in page:
            letter = _parse(selection.stream, sink_id, fields)
            if selection.keeps(letter):
                found.append(letter)
                if limit is not None and len(found) >= limit:
                    return found
        if len(page) < PAGE:
            return found
        after = page[-1][0]


def _parse(stream: Stream, sink_id: bytes, fields: dict[bytes, bytes]) -> StreamDeadLetter:
    millis = int(sink_id.split(b"-")[0])
    stored_at = datetime.fromtimestamp(millis / 1000, UTC)
    if stream.record.is_primitive():
        # The sink holds exact copies: their key routes them as it did the first time.
        try:
            partition: Partition | None = stream.partition_for(stream.decode(fields))
        except Exception:  # user data that no longer decodes: no partition then
            partition = None
        return StreamDeadLetter(sink_id, partition, None, stored_at, "", dict(fields))
    # 0.1's name, written on every store; the store's own key, which letters written on
    # memory:// or a Cluster before the name was fixed carry.
    by_key = {p.key: p for p in stream.partitions}
    by_key.update({letter_partition(p): p for p in stream.partitions})
    text = {k.decode(): v.decode(errors="replace") for k, v in fields.items() if k != DATA}
    try:
        failed_at = datetime.fromisoformat(text.get("failed_at", ""))
    except ValueError:
        failed_at = stored_at
    return StreamDeadLetter(
        sink_id,
        by_key.get(text.get("partition", "")),
        text.get("xid"),
        failed_at,
        text.get("error", ""),
        {DATA: fields.get(DATA, b"")},
    )


async def replay_stream_dead_letters(selection: Selection) -> int:
    """Send the selected dead letters back to the partitions they failed on, as stored
    (not re-encoded), and remove them from the sink; none when one names no partition of
    the stream any more (a RunnelError says so)."""
    stream = selection.stream
    letters = await stream_dead_letters(selection)
    lost = [x for x in letters if x.partition is None]
    if lost:
        raise RunnelError(
            f"{plural(len(lost), 'dead letter')} of {stream.name} name no partition of it "
            f"(first {lost[0].id.decode()}); nothing replayed"
        )
    admin = admin_of(stream.app.store)
    for start in range(0, len(letters), PAGE):
        chunk = letters[start : start + PAGE]
        entries = [(x.partition.id, x.fields) for x in chunk if x.partition is not None]
        await stream.append(entries)
        await admin.remove(selection.sink, [x.id for x in chunk])
    return len(letters)


async def purge_stream_dead_letters(selection: Selection, letters: list[StreamDeadLetter]) -> int:
    """Delete these dead letters (of the selection's sink) for good: how many were."""
    ids = [x.id for x in letters]
    return sum(
        [
            await admin_of(selection.stream.app.store).remove(selection.sink, ids[i : i + PAGE])
            for i in range(0, len(ids), PAGE)
        ]
    )
