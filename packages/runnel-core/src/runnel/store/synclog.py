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
import functools
import inspect
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from runnel.exceptions import Misconfigured, TransportError
from runnel.store.identity import DEFAULT_WINDOW, Appended, Identity, Window
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

    identities: ClassVar[bool] = True
    """Whether :meth:`append` takes identities; set per class from its signature (as
    :class:`runnel.store.Log`'s)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("append")
        if own is not None and "identity" not in inspect.signature(own).parameters:
            cls.identities = False
            cls.append = _without_identities(own)  # type: ignore[method-assign]

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
        *,
        identity: Identity | None = None,
        window: Window = DEFAULT_WINDOW,
    ) -> Appended:
        """Append ``(partition, fields)`` entries in order, in one round trip; each
        partition is held to ``maxlen`` entries as :meth:`Transport.append` does (a full
        partition: :class:`LogFull`, nothing appended; ``drop_oldest``: trimmed anyway,
        counted as lost). All or none where the store can (one Redis); else all or none
        per partition, and :class:`PartlyAppended` says which partitions' entries are in
        when some failed. With ``identity``, what a partition already took under it is
        not appended again, as :meth:`runnel.store.Log.append` says; the reply's
        :attr:`Appended.duplicates` counts it. Returns the entries' ids."""

    def forget_producer(self, partitions: Sequence[PartitionId], producer: str) -> None:  # noqa: B027
        """As :meth:`runnel.store.Log.forget_producer`: forget a sequenced producer that
        is done (optional; a store without identities: nothing to forget)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections (a later call connects again)."""

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url"])  # type: ignore[misc]


def _without_identities(append: Any) -> Any:
    """A sync log's ``append`` written before identities: refuses one clearly, returns
    what it returned as :class:`Appended` (an old one returned None: no ids)."""

    @functools.wraps(append)
    def plain(
        self: SyncLog, *args: Any, identity: Identity | None = None, window: Any = None, **kw: Any
    ) -> Appended:
        if identity is not None:
            raise Misconfigured(
                f"{type(self).__name__} cannot recognise an append it already took "
                "(its append() takes no identity)"
            )
        ids = append(self, *args, **kw)
        return ids if isinstance(ids, Appended) else Appended(ids or ())

    return plain


def next_id(xid: str) -> str:
    """The smallest id after ``xid`` (for reading on after the last entry seen)."""
    ms, _, seq = xid.partition("-")
    if int(seq) < MAX_SEQ:
        return f"{ms}-{int(seq) + 1}"
    return f"{int(ms) + 1}-0"


MAX_SEQ = 2**64 - 1
"""The largest sequence number of an id."""
