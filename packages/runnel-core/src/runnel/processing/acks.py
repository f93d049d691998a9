"""Coalesced, fenced acknowledgements.

An event is recorded in its partition's :class:`Acks` only once its loop iteration has
finished. The executor's :class:`Acknowledger` sends what every partition recorded in one
pipelined round trip, and sends again as soon as that returns (group commit): consumers
never wait for an acknowledgement, and the faster events finish, the bigger the batches.
The store acknowledges ids only while this executor holds the partition's lock. A failed
send gives the ids back for the next try: the worst case is a redelivery, never a loss.

Before a partition is given up, its consumer :meth:`Acks.drain`\\ s: it waits for a send in
flight and sends the rest itself, so everything finished is acknowledged before the lock
is released.

A partition with tables adds its changes to the same sends: each finished iteration seals
what it changed (:class:`~runnel.tables.partition.PartitionState`), and the store commits
those writes with the acknowledgement of the events that made them, in one fenced step
(:meth:`~runnel.store.coordination.Coordination.commit`). Writes are values, not
increments, so a send tried again after a lost reply changes nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runnel.exceptions import TransportError
from runnel.runtime.retry import Backoff, outage, reraise_if_cancelled
from runnel.store.state import Commit, Sends
from runnel.text import plural

if TYPE_CHECKING:
    from runnel.metrics.stats import PartitionStats
    from runnel.store.log import PartitionId
    from runnel.tables.partition import PartitionState

log = logging.getLogger("runnel.acks")

AckSink = Callable[[Mapping["PartitionId", Commit]], Awaitable[Sequence["PartitionId"]]]
"""Commits ids (and table writes) by partition, fenced by our locks; returns the partitions
we no longer hold (nothing of theirs applied). The executor's is ``Coordination.commit``
(or ``ack`` when nothing but ids goes) for its id."""


@dataclass
class Pending:
    """What one send of a partition carries: ids to acknowledge, the table writes their
    iterations sealed (table -> key -> value), and the last seal's number."""

    ids: list[bytes] = field(default_factory=list)
    writes: dict[str, dict[bytes, bytes | None]] = field(default_factory=dict)
    seq: int = 0
    sends: list[Sends] = field(default_factory=list)
    deadlines: dict[str, dict[bytes, float | None]] = field(default_factory=dict)

    def commit(self) -> Commit:
        return Commit(ids=self.ids, writes=self.writes, sends=self.sends, deadlines=self.deadlines)

    def merge(self, newer: Pending) -> Pending:
        """This, then ``newer`` on top (its values win): what both together commit."""
        return Pending(
            self.ids + newer.ids,
            _layered(self.writes, newer.writes),
            max(self.seq, newer.seq),
            self.sends + newer.sends,
            _layered(self.deadlines, newer.deadlines),
        )

    @property
    def changes(self) -> bool:
        """Whether it commits more than acknowledgements."""
        return bool(self.writes or self.sends or self.deadlines)

    @property
    def count(self) -> int:
        """The events it acknowledges."""
        return len(self.ids) + sum(len(s.ids) for s in self.sends)


def _layered(older: dict[str, dict[bytes, Any]], newer: dict[str, dict[bytes, Any]]) -> Any:
    out = {table: dict(values) for table, values in older.items()}
    for table, values in newer.items():
        out.setdefault(table, {}).update(values)
    return out


LostPartition = Callable[["PartitionId"], None]
"""Told that the store says a partition's lock is no longer ours."""


class Acks:
    """The finished, not yet acknowledged events of one partition."""

    def __init__(
        self,
        key: PartitionId,
        stats: PartitionStats,
        send: AckSink,
        lost: LostPartition,
        wake: Callable[[Acks], None],
        state: PartitionState | None = None,
    ) -> None:
        self.key = key
        self.stats = stats
        self.state = state
        self.ids: list[bytes] = []
        self._back = Pending()  # a failed send's writes and deadlines
        self.sends: list[Sends] = []  # what iterations sent, each with its first id
        self.draining = False  # the consumer sends the rest itself; the acknowledger keeps off
        self.batch = 1  # ids that wake the acknowledger; fewer wait for a read or a nudge
        self.commits_ride = False
        """Whether the store commits table writes in a read (then they wait for one, as
        ids alone do): ``Coordination.commits_ride``."""
        self._send = send
        self._lost = lost
        self._wake = wake
        self._sending = 0
        self.deferred = False  # the acknowledger found us busy: wake it when done
        self._idle = asyncio.Event()  # set while no send of ours is in flight
        self._idle.set()

    def add(self, xid: bytes) -> None:
        r"""Record a finished event (and seal its changes); the acknowledger sends it soon:
        at once when it is the first, or (with :attr:`batch` above 1, a partition without
        tables or whose table writes ride with reads) once ``batch`` ids are waiting or
        the consumer :meth:`nudge`\ s, unless the partition's next read takes them first."""
        state = self.state
        rides = state is None or self.commits_ride
        if not self.ids and not self.sends and (self.batch == 1 or not rides):
            self._wake(self)
        if state is not None and state.changed:
            state.seal()  # raises (and seals nothing) on a value that cannot be encoded
            if state.outputs:  # acknowledged with its outputs: appended only the first time
                outputs = state.take_outputs()
                self.sends.append(Sends([xid], outputs))
                return
        self.ids.append(xid)
        if len(self.ids) == self.batch and rides:
            self._wake(self)

    def nudge(self) -> None:
        """The consumer is about to wait (nothing buffered, the lease to confirm, or
        stopping): send what is recorded now."""
        if self.ids or self.sends:
            self._wake(self)

    @property
    def rides(self) -> bool:
        """Whether a read may carry what is recorded: ids, with the table writes of their
        iterations where the store commits those in a read (no outputs, nothing given
        back), and no drain under way."""
        return (
            bool(self.ids)
            and not self.sends
            and not self.draining
            and (self.state is None or (self.commits_ride and not self._sending))
            and not self._back.changes
        )

    @property
    def busy(self) -> bool:
        """Whether a send of table writes is in flight: the next must wait for it, or an
        older value could be stored over a newer one (two sends, two connections)."""
        return self.state is not None and self._sending > 0

    @property
    def waiting(self) -> bool:
        """Whether there is something to send."""
        return bool(self.ids) or bool(self.sends)

    def take(self) -> Pending:
        """Hand what is recorded to a sender (which must :meth:`done` or :meth:`give_back`)."""
        state = self.state
        if state is not None:
            seq, writes, deadlines = state.take()
            pending = Pending(self.ids, writes, seq, self.sends, deadlines)
        else:
            pending = Pending(self.ids, sends=self.sends)
        if self._back.changes:  # a failed send's writes, under the newer ones
            pending = self._back.merge(pending)
            self._back = Pending()
        self.ids, self.sends = [], []
        self.stats.processed += pending.count  # counted per batch taken, not per event
        self._sending += 1
        self._idle.clear()
        return pending

    def give_back(self, pending: Pending) -> None:
        self.ids = pending.ids + self.ids
        self.sends = pending.sends + self.sends
        back = Pending(writes=pending.writes, seq=pending.seq, deadlines=pending.deadlines)
        self._back = back.merge(self._back)
        self.stats.processed -= pending.count
        self.done()

    def committed(self, pending: Pending) -> None:
        self.stats.acked += pending.count
        if self.state is not None:
            self.state.committed(pending.seq, pending.writes)

    def done(self) -> None:
        self._sending -= 1
        if not self._sending:
            self._idle.set()
            if self.deferred:  # the acknowledger passed us by meanwhile
                self.deferred = False
                if self.waiting and not self.draining:
                    self._wake(self)

    async def flush(self) -> bool | None:
        """Send what is recorded now: True once acknowledged, False if the partition is
        lost (its new owner processes these again), None if the send failed and the ids
        are kept for another try."""
        if not self.waiting:
            return True
        pending = self.take()
        count = pending.count
        try:
            lost = await self._send({self.key: pending.commit()})
        except BaseException as exc:
            self.give_back(pending)
            if not isinstance(exc, TransportError):
                raise
            reraise_if_cancelled(exc)
            outage.failed(
                f"acknowledging {plural(count, 'event')} on partition {self.key.number}", exc
            )
            return None
        self.done()
        if lost:
            # Someone else owns the partition now; they will process these again.
            log.warning("lost %s before acknowledging %d events", _name(self.key), count)
            self._lost(self.key)
            return False
        self.committed(pending)
        return True

    async def drain(self) -> bool:
        """Before giving the partition up: wait for any send in flight, then send the rest
        ourselves (the acknowledger no longer takes ours, so nothing can slip past).

        A failed send (the store slow or away for a moment) is tried again with backoff
        until it goes through or the partition turns out lost; the runner bounds that with
        the grace period, cancelling us, and what is still recorded then is redelivered."""
        self.draining = True
        await self._idle.wait()
        backoff = Backoff()
        while (sent := await self.flush()) is None:
            await backoff.sleep()
        return sent


class Acknowledger:
    """One executor's sender of acknowledgements for all its partitions."""

    def __init__(self, send: AckSink, lost: LostPartition) -> None:
        self._send = send
        self._lost = lost
        self._waiting: dict[PartitionId, Acks] = {}
        self._wake = asyncio.Event()

    def wake(self, acks: Acks) -> None:
        self._waiting[acks.key] = acks
        self._wake.set()

    async def run(self) -> None:
        backoff = Backoff()
        while True:
            reraise_if_cancelled()
            await self._wake.wait()
            self._wake.clear()
            waiting, self._waiting = self._waiting, {}
            for acks in waiting.values():
                if acks.busy:  # a read carries its writes: sent once that is done
                    acks.deferred = True
            taken = {
                key: (acks, acks.take())
                for key, acks in waiting.items()
                if acks.waiting and not acks.draining and not acks.busy
            }
            if not taken:
                continue
            try:
                lost = await self._send({key: p.commit() for key, (_, p) in taken.items()})
            except BaseException as exc:
                for key, (acks, pending) in taken.items():
                    acks.give_back(pending)
                    self._waiting[key] = acks
                if not isinstance(exc, TransportError):
                    raise
                reraise_if_cancelled(exc)
                count = sum(p.count for _, p in taken.values())
                outage.failed(f"acknowledging {plural(count, 'event')}", exc)
                self._wake.set()
                await backoff.sleep()
                continue
            backoff.reset()
            for key, (acks, pending) in taken.items():
                acks.done()
                if key not in lost:
                    acks.committed(pending)
            for key in lost:
                # Someone else owns the partition now; they will process these again.
                log.warning(
                    "lost %s before acknowledging %d events", _name(key), taken[key][1].count
                )
                self._lost(key)


def _name(partition: PartitionId) -> str:
    return f"{partition.stream} partition {partition.number}"
