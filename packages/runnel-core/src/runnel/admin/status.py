"""What ``runnel status`` shows: who runs what, who leads, how far behind each partition
is; and what the dashboard adds to it (stream lengths, the events ever appended to each
stream, the schedule)."""

from __future__ import annotations

from typing import Any

from runnel.admin.declarations import Declarations
from runnel.exceptions import Misconfigured
from runnel.store.backend import admin_of
from runnel.store.coordination import Quarantine
from runnel.store.log import PartitionId
from runnel.stream import Stream

QUARANTINED = "QUARANTINED"


def _state(owner: str | None, quarantine: Quarantine | None) -> str:
    if quarantine is not None:
        return QUARANTINED
    return "owned" if owner else "unowned"


async def status_report(app: Declarations) -> dict[str, Any]:
    """What ``runnel status --json`` prints: the app, its leader and key layout; each
    processor's executors and each partition's owner, lag, pending, lost and state; the
    length of each partition of a stream no processor reads; for each stream, the
    records sends gave it that it had already (duplicates dropped)."""
    store = app.store
    admin = admin_of(store)
    report: dict[str, Any] = {
        "app": app.name,
        "leader": await store.leadership(app.name).leader(),
        "key_layout": store.key_layout,
        "processors": [],
        "streams": [],
    }
    for proc in app.processors.values():
        stream = proc.stream
        coord = store.coordination(app.name, stream.name, proc.name)
        members = await coord.members()
        alive = await coord.alive(list(members))
        keys = [p.id for p in stream.partitions]
        owners = await coord.lock_owners(keys)
        backlog = await admin.backlog(keys, proc.name)
        lost = await store.log.lost(keys, proc.name)
        quarantined = await coord.quarantined()
        report["processors"].append(
            {
                "name": proc.name,
                "stream": stream.name,
                "duplicates_dropped": sum((await admin.duplicates(keys)).values()),
                "executors": [
                    {
                        "id": ex_id,
                        "host": info.host,
                        "pid": info.pid,
                        "alive": ex_id in alive,
                        "partitions": info.partitions,
                    }
                    for ex_id, info in sorted(members.items())
                ],
                "partitions": [
                    {
                        "number": key.number,
                        "owner": owners.get(key),
                        "lag": backlog[key][0],
                        "pending": backlog[key][1],
                        "lost": lost[key],
                        "state": _state(owners.get(key), quarantined.get(key)),
                        "failing_id": q.id if (q := quarantined.get(key)) else None,
                    }
                    for key in keys
                ],
            }
        )
    read = {proc.stream.name for proc in app.processors.values()}
    for stream in app.streams.values():
        if stream.name not in read:
            report["streams"].append(await _unread(app, stream))
    return report


async def _unread(app: Declarations, stream: Stream) -> dict[str, Any]:
    """A stream no processor reads: how much each partition holds (what sending it put
    there, less any trimming), the one number that shows whether a send went in."""
    keys = [p.id for p in stream.partitions]
    admin = admin_of(app.store)
    try:
        lengths: dict[PartitionId, int | None] = dict(await admin.lengths(keys))
    except Misconfigured:  # a store that cannot count
        lengths = dict.fromkeys(keys)
    return {
        "name": stream.name,
        "duplicates_dropped": sum((await admin.duplicates(keys)).values()),
        "partitions": [{"number": key.number, "length": lengths[key]} for key in keys],
    }


async def stream_length(app: Declarations, processor: str) -> int | None:
    """How many entries the processor's stream holds over all partitions (None where the
    store cannot tell)."""
    keys = [p.id for p in app.processors[processor].stream.partitions]
    try:
        return sum((await admin_of(app.store).lengths(keys)).values())
    except Misconfigured:
        return None


async def stream_appended(app: Declarations, processor: str) -> int | None:
    """How many entries were ever appended to the processor's stream over all partitions,
    a count trimming does not lower (None where the store cannot tell)."""
    keys = [p.id for p in app.processors[processor].stream.partitions]
    try:
        counts = await admin_of(app.store).appended(keys)
    except Misconfigured:
        return None
    if any(n is None for n in counts.values()):
        return None
    return sum(n or 0 for n in counts.values())


def schedule_report(app: Declarations) -> list[dict[str, Any]]:
    """The app's timers and crontabs (not its start-up tasks): when each runs, and where."""
    return [
        {
            "name": task.name,
            "kind": task.kind,
            "every": task.interval,
            "crontab": task.spec,
            "on_leader": task.on_leader,
        }
        for task in app.background
        if task.kind != "task"
    ]
