"""The streams views: each stream's dead letters (what ``runnel dead list`` shows), the
quarantined partitions, failures per processor and the events lost to trimming, read
through core's read models and interfaces (:mod:`runnel.admin`, the store's roles).

Reading is bounded: at most :data:`DEAD_SHOWN` dead letters of each stream (its oldest),
while the count is the sink's length, so the page says how many it leaves out.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from runnel.admin.dead_letters import (
    Selection,
    forwarding_processors,
    sinks,
    stream_dead_letters,
)
from runnel.app import App
from runnel.exceptions import Misconfigured
from runnel.store.backend import admin_of

DEAD_SHOWN = 100
"""Dead letters listed per stream at most (the oldest); the count covers them all."""


async def sink_lengths(app: App) -> dict[str, int | None]:
    """How many dead letters each stream's sink holds (None: a store that cannot count)."""
    pairs = sinks(app)
    keys = [sink.partitions[0].id for _, sink in pairs]
    try:
        lengths: dict[Any, int | None] = dict(await admin_of(app.store).lengths(keys))
    except Misconfigured:
        lengths = dict.fromkeys(keys)
    return {source.name: lengths[sink.partitions[0].id] for source, sink in pairs}


async def sink_counts(app: App) -> dict[str, tuple[int | None, int | None]]:
    """Per stream with a sink: the dead letters it holds, and how many were ever appended
    to it (a count that replaying, purging and trimming leave alone, for a rate); None
    where the store cannot tell."""
    pairs = sinks(app)
    keys = [sink.partitions[0].id for _, sink in pairs]
    try:
        admin = admin_of(app.store)
        lengths: dict[Any, int | None] = dict(await admin.lengths(keys))
        appended = await admin.appended(keys)
    except Misconfigured:
        lengths, appended = dict.fromkeys(keys), dict.fromkeys(keys)
    return {
        source.name: (lengths[sink.partitions[0].id], appended[sink.partitions[0].id])
        for source, sink in pairs
    }


async def dead_letters_report(app: App) -> list[dict[str, Any]]:
    """Per stream with a sink: the count, per-partition counts of those listed, and the
    oldest :data:`DEAD_SHOWN` letters."""
    counts = await sink_lengths(app)
    report = []
    for source, _ in sinks(app):
        letters = await stream_dead_letters(
            Selection(source, None, None, None, None), limit=DEAD_SHOWN
        )
        rows = [
            {
                "id": letter.id.decode(),
                "partition": letter.partition.number if letter.partition else None,
                "source_id": letter.source_id,
                "failed": letter.failed_at.isoformat(timespec="seconds"),
                "error": letter.error,
            }
            for letter in letters
        ]
        shown = Counter(row["partition"] for row in rows)
        report.append(
            {
                "stream": source.name,
                "processors": forwarding_processors(app, source),
                "count": counts[source.name],
                "shown": len(rows),
                "by_partition": [
                    {"partition": number, "shown": n}
                    for number, n in sorted(shown.items(), key=lambda kv: (kv[0] is None, kv[0]))
                ],
                "letters": rows,
            }
        )
    return report


async def processor_report(app: App, proc: Any) -> dict[str, Any]:
    """One processor (of ``app.processors``): its quarantined partitions (why and since
    when) and lost events."""
    stream = proc.stream
    keys = [p.id for p in stream.partitions]
    try:
        quarantined = await app.store.coordination(app.name, stream.name, proc.name).quarantined()
    except Misconfigured:  # a store that keeps no quarantines
        quarantined = {}
    lost = await app.store.log.lost(keys, proc.name)
    try:
        lengths: dict[Any, int | None] = dict(await admin_of(app.store).lengths(keys))
    except Misconfigured:
        lengths = dict.fromkeys(keys)
    return {
        "processor": proc.name,
        "stream": stream.name,
        "policy": proc.exception_policy.name,
        "quarantined": [
            {
                "partition": key.number,
                "failing_id": q.id,
                "since": q.since,
                "error": q.error,
            }
            for key in keys
            if (q := quarantined.get(key)) is not None
        ],
        "lost": [
            {"partition": key.number, "lost": lost[key], "length": lengths[key]}
            for key in keys
            if lost[key]
        ],
    }


async def streams_report(app: App) -> dict[str, Any]:
    """What the streams views show: dead letters per stream, and per processor its
    quarantined partitions, lost events, and a failure summary."""
    dead = await dead_letters_report(app)
    counts = {d["stream"]: d["count"] for d in dead}
    processors = []
    for proc in app.processors.values():
        entry = await processor_report(app, proc)
        forwards = proc.name in forwarding_processors(app, proc.stream)
        entry["dead_letters"] = counts.get(proc.stream.name) if forwards else None
        entry["lost_total"] = sum(x["lost"] for x in entry["lost"])
        processors.append(entry)
    return {"dead_shown": DEAD_SHOWN, "dead": dead, "processors": processors}
