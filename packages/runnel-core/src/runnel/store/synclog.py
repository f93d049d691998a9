"""Synchronous access to a store's partition logs, for engines that run their own processes.

Batch engines (Spark) plan on one process and read or write on many others, none of them
in an event loop. A :class:`SyncLog` gives them what they need of a store without the
rest of the runtime: how much each partition holds, its entries between two ids, and
appends through the same path as :meth:`runnel.stream.Stream.send` (all or none on one
Redis, per partition on a cluster). A transport
provides it (:meth:`runnel.transport.Transport.sync_log`); it pickles as its URL, so it
can be shipped to other processes, where it connects again on first use.

Entry ids are ``MILLISECONDS-SEQUENCE`` text, as in the rest of the core.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from runnel.exceptions import TransportError
from runnel.store.log import Fields, PartitionId

Entries = list[tuple[bytes, dict[bytes, bytes]]]
"""Entries read back, oldest first: id and fields."""


class LogError(TransportError):
    """The store failed a read or an append (a lost connection, a refusal)."""


class LogFull(LogError):
    """An append found ``partition`` at its size with entries consumer group ``group`` has
    not acknowledged (see :meth:`Transport.append`): nothing of it was appended; the
    caller may wait and try again."""

    def __init__(self, message: str, partition: PartitionId, group: str) -> None:
        super().__init__(message)
        self.partition = partition
        self.group = group


class PartlyAppended(LogError):
    """An append over several partitions failed for some of them, on a store that writes
    each partition's part whole but not the batch (Redis Cluster): ``written`` are the
    partitions whose entries are all in, ``refused`` those of which nothing was written,
    ``unknown`` those whose reply was lost (written or not)."""

    def __init__(
        self,
        message: str,
        written: Sequence[PartitionId],
        refused: Sequence[PartitionId] = (),
        unknown: Sequence[PartitionId] = (),
    ) -> None:
        super().__init__(message)
        self.written = list(written)
        self.refused = list(refused)
        self.unknown = list(unknown)


@dataclasses.dataclass(frozen=True)
class Extent:
    """What a partition holds now: how many entries, its first and last id (None if empty)."""

    length: int
    first: str | None
    last: str | None


class SyncLog(abc.ABC):
    """A store's partition logs, synchronously; picklable (as :attr:`url`)."""

    url: str
    """Where the store is, as any process can reach it."""

    @abc.abstractmethod
    def extents(self, partitions: Sequence[PartitionId]) -> list[Extent]:
        """Length, first and last id of each partition, in one round trip."""

    @abc.abstractmethod
    def read(self, partition: PartitionId, first: str, last: str, count: int) -> Iterator[Entries]:
        """The entries of ``partition`` with ids from ``first`` to ``last`` (both included),
        oldest first, about ``count`` per round trip."""

    @abc.abstractmethod
    def nth_ids(self, ranges: Sequence[tuple[PartitionId, str, str, int]]) -> list[str | None]:
        """For each ``(partition, first, last, n)``: the id of the ``n``-th entry from ``first``
        (both bounds included), or of the last in range if there are fewer; None if the
        range is empty. In one round trip, without fetching the entries."""

    @abc.abstractmethod
    def append(
        self,
        entries: Sequence[tuple[PartitionId, Fields]],
        maxlen: int | None = None,
        drop_oldest: bool = False,
    ) -> None:
        """Append ``(partition, fields)`` entries in order, in one round trip; each
        partition is held to ``maxlen`` entries as :meth:`Transport.append` does (a full
        partition: :class:`LogFull`, nothing appended; ``drop_oldest``: trimmed anyway,
        counted as lost). All or none where the store can (one Redis); else all or none
        per partition, and :class:`PartlyAppended` says which partitions' entries are in
        when some failed."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections (a later call connects again)."""

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url"])  # type: ignore[misc]


def next_id(xid: str) -> str:
    """The smallest id after ``xid`` (for reading on after the last entry seen)."""
    ms, _, seq = xid.partition("-")
    if int(seq) < MAX_SEQ:
        return f"{ms}-{int(seq) + 1}"
    return f"{int(ms) + 1}-0"


MAX_SEQ = 2**64 - 1
"""The largest sequence number of an id."""
