"""The state role of a store: tables, committed together with acknowledgements.

A table is a map of keys to values per partition of its source stream (co-partitioned:
a key lives in the partition its stream routes it to). Keys and values cross this
interface as bytes, encoded by the core. The processor's changes reach the store only in
a :class:`Commit`, through :meth:`runnel.store.coordination.Coordination.commit`: the
entries acknowledged and the table writes their handling made, applied in one step or not
at all, and only while the committer holds the partition's lock. That is what makes a
table exactly-once: after any crash, it equals the result of applying every acknowledged
entry once.

Reads here are of committed values, by anyone: the owner when a key is first needed, other
processors and app code (a lookup), the CLI.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from runnel.store.log import Fields, PartitionId

Writes = Mapping[str, Mapping[bytes, bytes | None]]
"""Table name -> key -> the value to store, or None to delete the key."""


Deadlines = Mapping[str, Mapping[bytes, float | None]]
"""Table name -> key -> when the key next needs its owner's attention (a window closing or
expiring, in seconds of event time), or None to drop it: kept ordered, so that
:meth:`TableStore.due` finds the earliest."""


Output = tuple[PartitionId, Fields, int | None]
"""An entry a processor sends while handling entries: the partition it goes to, its
fields, and that partition's size cap (``partition_size``; None: none)."""


@dataclass(frozen=True, slots=True)
class Sends:
    """What handling ``ids`` sent: appended only if those ids are still unacknowledged
    when the commit runs, and acknowledged with them. A commit sent again after a lost
    reply (its ids acknowledged already) so appends nothing twice."""

    ids: Sequence[bytes]
    outputs: Sequence[Output]


@dataclass(frozen=True, slots=True)
class Commit:
    """One partition's step made permanent at once: ``ids`` acknowledged in the
    processor's group, ``writes`` (the tables' values after those entries) stored, and
    each of ``sends`` appended with its ids, in order, and ``deadlines`` set: all of it, or
    none."""

    ids: Sequence[bytes] = ()
    writes: Writes = field(default_factory=dict)
    sends: Sequence[Sends] = ()
    deadlines: Deadlines = field(default_factory=dict)


class TableStore(abc.ABC):
    """The committed state of one app's tables, per source partition."""

    @abc.abstractmethod
    async def get(
        self, table: str, partition: PartitionId, keys: Sequence[bytes]
    ) -> list[bytes | None]:
        """The committed values of ``keys`` (None for a key not stored), in order."""

    async def get_small(
        self, table: str, partition: PartitionId, keys: Sequence[bytes], limit: int
    ) -> tuple[list[bytes | None], dict[bytes, bytes] | None]:
        """:meth:`get`, and every entry of the partition when it holds at most ``limit``
        (else None): its owner then reads no key from the store again, as it is the only
        writer. A store may always answer None."""
        return await self.get(table, partition, keys), None

    @abc.abstractmethod
    async def scan(
        self, table: str, partition: PartitionId, cursor: bytes, count: int
    ) -> tuple[bytes, list[tuple[bytes, bytes]]]:
        """About ``count`` entries from ``cursor`` (``b""`` to start), in no particular
        order, and the cursor to go on from: ``b""`` once every entry was returned.
        Entries stored or deleted during a scan may or may not be returned; every other
        entry is returned, once or (rarely, on some stores) more."""

    @abc.abstractmethod
    async def due(
        self, table: str, partition: PartitionId, count: int, offset: int = 0
    ) -> list[tuple[bytes, float]]:
        """Keys with their deadlines (see :data:`Deadlines`), earliest first: ``count`` of
        them from the ``offset``-th."""

    @abc.abstractmethod
    async def sizes(self, table: str, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        """How many keys each partition of the table holds."""

    @abc.abstractmethod
    async def clear(self, table: str, partitions: Sequence[PartitionId]) -> None:
        """Delete every key (and deadline) of the table on these partitions."""

    @abc.abstractmethod
    async def partition_counts(self, tables: Sequence[str]) -> dict[str, int]:
        """The partition count each table was first committed with (absent: none yet)."""

    @abc.abstractmethod
    async def set_partition_count(self, table: str, count: int) -> int:
        """Record ``count`` for ``table`` unless one is recorded; the one recorded."""

    @abc.abstractmethod
    async def forget(self, table: str) -> None:
        """Drop what :meth:`set_partition_count` recorded (the table was cleared)."""
