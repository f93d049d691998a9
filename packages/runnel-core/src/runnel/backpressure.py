"""Waiting for room in a full partition, instead of trimming what nobody processed.

A store refuses entries for a partition that is at its ``partition_size`` when what fills
it is not acknowledged yet (:class:`~runnel.exceptions.PartitionFull`). The sender then
waits: it tries again, backing off, until the slowest processor has acknowledged enough
for the store to trim, or ``full_timeout`` has passed. Entries a store did take meanwhile
(a Redis Cluster takes each partition's share on its own) are not sent twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from runnel.exceptions import PartitionFull
from runnel.store.identity import Appended
from runnel.store.log import Fields, PartitionId

log = logging.getLogger("runnel.send")

Append = Callable[[Sequence[int]], Awaitable[Appended]]
"""The store's append of the send's entries at these indexes (with their ids or their
identity), the cap and the ``on_full`` choice already bound."""

FIRST_PAUSE = 0.01
LONGEST_PAUSE = 0.5
QUIET = 10.0
"""Seconds between two warnings about the same full partition."""

_warned: dict[tuple[str, int], float] = {}


def too_big(entries: Sequence[tuple[PartitionId, Fields]], maxlen: int) -> PartitionFull | None:
    """The error for a send that gives one partition more entries than it may ever hold
    unacknowledged (it could wait forever), or None."""
    if len(entries) <= maxlen:
        return None
    (partition, count), *_ = Counter(p for p, _ in entries).most_common(1)
    if count <= maxlen:
        return None
    return PartitionFull(
        f"{count} records of this send go to partition {partition.number} of stream "
        f"{partition.stream!r}, more than its partition_size ({maxlen}) lets it hold before "
        "a processor acknowledges them; send them in smaller batches. Nothing was sent",
        [None] * len(entries),
        partition.stream,
        partition.number,
        None,
        maxlen,
    )


async def wait_for_room(
    append: Append, count: int, refused: PartitionFull, patience: float
) -> Appended:
    """Retry ``append`` of the ``count`` entries ``refused`` says are not in, until all
    are or ``patience`` seconds have passed (then :class:`PartitionFull`, saying which
    are in)."""
    got: list[bytes | None] = [None] * count
    todo = list(range(count))
    deadline = time.monotonic() + patience
    pause = FIRST_PAUSE
    while True:
        for i, xid in zip(todo, refused.ids, strict=True):
            if xid is not None:
                got[i] = xid
        todo = [i for i in todo if got[i] is None]
        left = deadline - time.monotonic()
        if left <= 0:
            raise _gave_up(refused, got, patience)
        where = (refused.stream, refused.partition)
        if time.monotonic() - _warned.get(where, -QUIET) >= QUIET:
            _warned[where] = time.monotonic()
            log.warning(
                "partition %d of stream %r is full with events processor %r has not "
                "acknowledged; waiting up to %g s for room (full_timeout)",
                refused.partition,
                refused.stream,
                refused.processor,
                patience,
            )
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, LONGEST_PAUSE)
        try:
            added = await append(todo)
        except PartitionFull as again:
            refused = again
            continue
        for i, xid in zip(todo, added, strict=True):
            got[i] = xid
        return Appended([xid for xid in got if xid is not None], added.duplicates)


def _gave_up(refused: PartitionFull, got: list[bytes | None], timeout: float) -> PartitionFull:
    sent = sum(xid is not None for xid in got)
    what = "nothing of this send was stored" if not sent else f"{sent} of {len(got)} records are in"
    slowest = f"processor {refused.processor!r}" if refused.processor else "a processor"
    return PartitionFull(
        f"partition {refused.partition} of stream {refused.stream!r} is full: its "
        f"{refused.size} entries (partition_size) are not all acknowledged by {slowest}, "
        f"which did not make room within {timeout:g} s (full_timeout); {what}",
        got,
        refused.stream,
        refused.partition,
        refused.processor,
        refused.size,
    )
