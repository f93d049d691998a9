"""The log role of a store: partitioned append-only logs with consumer groups.

The core never names a store command or key. A partition is named everywhere, in
:class:`Log` and :class:`~runnel.store.coordination.Coordination` alike, by one value, a
:class:`PartitionId` (app, stream, number): it is what the core already knows, it needs no
store to build, and a store derives its own key from it, so nothing ever parses a key back
(app and stream names may contain dots). Where a read starts is a :class:`Position` the
store translates into its own syntax.

An append may carry an identity (:mod:`runnel.store.identity`): the store then drops
what the partition already took under it and replies with the original ids, so that a
retry never duplicates. A store says it can by taking the ``identity`` keyword; one that
does not (written before identities) is refused such appends with a clear error
(:meth:`Log.__init_subclass__`), and its plain appends work as they did.

:class:`Log` is what every store has (appending, consumer groups); :class:`LogAdmin` is
what the operating commands need on top (backlogs, listing and deleting entries), which a
store may offer or not (:meth:`runnel.store.Backend.admin`). Reading and acknowledging
are fenced by partition locks, so they belong to the coordination role.
"""

from __future__ import annotations

import abc
import functools
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from runnel.exceptions import Misconfigured
from runnel.store.identity import DEFAULT_WINDOW, Appended, Identity, Window


class PartitionId(NamedTuple):
    """Partition ``number`` of ``stream`` in ``app``: the one name of a partition in every
    store method. A tuple, so that it hashes fast as a dict key on the read path."""

    app: str
    stream: str
    number: int


Fields = Mapping[bytes, Any]
"""An entry's field/value pairs as given to :meth:`Transport.append`."""
Entry = tuple[bytes, dict[bytes, bytes] | None]
"""An entry read back: its id and fields (``None`` if it was trimmed before it was read)."""


@dataclass(frozen=True, slots=True)
class Position:
    """Where a read of one partition starts, in the store's terms but not its syntax.

    ``new``: entries never delivered to the group. Otherwise the reader's own delivered
    but unacknowledged entries after the entry id ``after`` (``None``: from the oldest).
    """

    new: bool = False
    after: bytes | None = None

    @staticmethod
    def pending_after(entry_id: bytes | None) -> Position:
        return Position(after=entry_id) if entry_id is not None else PENDING


NEW = Position(new=True)
"""Read entries never delivered to this group."""
PENDING = Position()
"""Read from the oldest entry this reader has not acknowledged."""


class Log(abc.ABC):
    """Partitioned append-only logs with consumer groups."""

    identities: ClassVar[bool] = True
    """Whether :meth:`append` takes identities; set per class from its signature."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("append")
        if own is not None and "identity" not in inspect.signature(own).parameters:
            cls.identities = False
            cls.append = _without_identities(own)  # type: ignore[method-assign]

    @abc.abstractmethod
    def partition_key(self, partition: PartitionId) -> str:
        """The store's own name for ``partition``: for people (CLI, logs). Never parsed
        back (a dead letter names its partition the same way on every store)."""

    @abc.abstractmethod
    async def append(
        self,
        entries: Sequence[tuple[PartitionId, Fields]],
        maxlen: int | None = None,
        ids: Sequence[str] | None = None,
        drop_oldest: bool = False,
        *,
        identity: Identity | None = None,
        window: Window = DEFAULT_WINDOW,
    ) -> Appended:
        """Append ``(partition, fields)`` entries in one round trip, all or none (or,
        for a store that cannot, all or none per partition, raising
        :class:`~runnel.exceptions.PartlySent` when only some are in); return their ids.

        ``maxlen`` caps each partition (a stream's ``partition_size``). A partition longer
        than ``maxlen + trim_slack(maxlen)`` is trimmed from its oldest entry back to
        ``maxlen``, but by default never past an entry that a consumer group has not
        acknowledged (read or not): if the entries cannot fit without that, nothing is
        appended to that partition and :class:`~runnel.exceptions.PartitionFull` is
        raised, naming the partition and the group holding the oldest such entry. With
        ``drop_oldest`` the cap wins: the oldest entries go whatever their state, and
        each group's count of entries it never read that went is added to its
        :meth:`lost` count (its lag stays true: it no longer counts them).

        ``ids`` (only passed when a caller gives them) are the entries' ids, ``"*"`` for
        one the store picks, else ``"MS-SEQ"`` in canonical decimal; the caller has checked
        that those of one partition rise and that none follows a ``"*"`` of its partition.
        If one is not above the last id its partition ever had, nothing is appended and
        :class:`~runnel.exceptions.EntryIdError` is raised.

        ``identity`` (not with ``ids``; checked by :func:`runnel.store.identity.checked`)
        makes the append idempotent within ``window``, per partition and atomically with
        it: what a partition already took under the identity is not appended again, its
        ids in the reply are the original ones (or ``b"0-0"`` where no longer known), and
        :attr:`Appended.duplicates` counts those entries. A :class:`CallIdentity` found
        on a partition means all of the call's entries there are in; a
        :class:`SequencedIdentity`'s entries numbered at or below the partition's highest
        from that producer are in; a :class:`KeyedIdentity`'s entries whose key the
        partition remembers are in (and of two entries of one call with one key, the
        later is the duplicate of the earlier). The room check (``maxlen``) counts only
        what is appended. Each duplicate is added to the partition's
        :meth:`LogAdmin.duplicates` count.
        """

    async def forget_producer(self, partitions: Sequence[PartitionId], producer: str) -> None:  # noqa: B027
        """Forget what ``partitions`` remember of a :class:`SequencedIdentity`'s
        ``producer`` (it is done: its numbers will not come again); optional, as the
        state goes by itself ``window.seconds`` after the producer's last call. A store
        without identities: nothing to forget."""

    @abc.abstractmethod
    async def ensure_group(self, partitions: Sequence[PartitionId], group: str) -> None:
        """Create consumer group ``group`` on every partition (and the partition itself)
        if missing."""

    @abc.abstractmethod
    async def adopt_pending(self, partition: PartitionId, group: str, consumer: str) -> int:
        """Move entries pending for other consumers of ``group`` to ``consumer``.

        Called when an executor starts, so that what consumers of other names (runnel 0.1
        used one per worker) read but never acknowledged is delivered again, first and in
        order. Runnel itself reads as one consumer name, so this is a one-time migration.
        """

    @abc.abstractmethod
    async def last_delivered(
        self, partitions: Sequence[PartitionId], group: str
    ) -> dict[PartitionId, bytes]:
        """The id of the newest entry delivered to ``group`` on each partition; a
        partition without the group (or never made) is left out."""

    @abc.abstractmethod
    async def wait_for_new(self, after: Mapping[PartitionId, bytes | None], block_ms: int) -> bool:
        """Block until some partition has an entry newer than its id in ``after`` (None:
        any entry) or time is up.

        Changes no state, so it can be abandoned at any time; True if something arrived.
        """

    async def lost(self, partitions: Sequence[PartitionId], group: str) -> dict[PartitionId, int]:
        """For each partition: how many entries were trimmed before ``group`` read them
        (``drop_oldest``, or entries it had read but not acknowledged found gone when
        read again: :meth:`count_lost`). A store that never trims such entries: 0."""
        return dict.fromkeys(partitions, 0)

    async def count_lost(  # noqa: B027 (a store that never trims unread entries: nothing)
        self, partition: PartitionId, group: str, count: int
    ) -> None:
        """Add ``count`` to ``group``'s :meth:`lost` count of ``partition``."""


class LogAdmin(abc.ABC):
    """What the operating commands (status, dead letters, processor skip and reset) need
    of the logs beyond :class:`Log`; a store may offer it or not."""

    @abc.abstractmethod
    async def reset_group(self, partitions: Sequence[PartitionId], group: str, start: str) -> None:
        """Point the group at ``start`` on every partition, forgetting pending entries.
        ``start`` is as the user gave it: ``0`` (the beginning), ``$`` (the end) or an
        entry id."""

    @abc.abstractmethod
    async def backlog(
        self, partitions: Sequence[PartitionId], group: str
    ) -> dict[PartitionId, tuple[int | None, int]]:
        """For each partition: (entries not yet delivered to the group, entries delivered
        but not acknowledged). The first is None where the store cannot tell."""

    @abc.abstractmethod
    async def first_pending(self, partition: PartitionId, group: str) -> bytes | None:
        """The oldest entry delivered to ``group`` and not acknowledged (``runnel
        processor skip``)."""

    @abc.abstractmethod
    async def ack(self, partition: PartitionId, group: str, ids: Sequence[bytes]) -> None:
        """Acknowledge entries without holding the partition's lock (``runnel processor
        skip``; workers acknowledge through their coordination, fenced)."""

    @abc.abstractmethod
    async def scan(
        self, partition: PartitionId, after: bytes | None, count: int
    ) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """Up to ``count`` entries with ids after ``after`` (None: from the first), oldest
        first; a page of what is stored, for the CLI."""

    @abc.abstractmethod
    async def remove(self, partition: PartitionId, ids: Sequence[bytes]) -> int:
        """Delete these entries; return how many were there."""

    @abc.abstractmethod
    async def lengths(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        """For each partition: how many entries it holds now (appended, less any trimmed
        or removed)."""

    async def duplicates(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int]:
        """For each partition: how many entries appends with identities were not given
        again because the partition had them already, since it began. A store without
        identities drops none: 0."""
        return dict.fromkeys(partitions, 0)

    async def remembered(
        self, partitions: Sequence[PartitionId]
    ) -> dict[PartitionId, tuple[int, int]]:
        """For each partition: the call identities and keys it remembers now (at most
        the window's ``keys``), and the producers whose numbers it remembers. A store
        without identities: none."""
        return dict.fromkeys(partitions, (0, 0))

    @abc.abstractmethod
    async def appended(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, int | None]:
        """For each partition: how many entries were ever appended to it, a count that
        trimming and removing leave alone (0 for a partition never written), so that a
        monitor can tell how many arrived between two looks; None where the store cannot
        tell."""


def trim_slack(maxlen: int) -> int:
    """How far past ``maxlen`` a partition may grow before it is trimmed back to it: 1 %,
    between 1 and 1,000 entries, so that the cost of a trim (finding what may go) is paid
    once per that many appends rather than on each. Every store uses this bound."""
    return max(1, min(1_000, maxlen // 100))


def _without_identities(append: Any) -> Any:
    """A store's ``append`` written before identities: refuses one with a clear error,
    and returns its ids as :class:`Appended`."""

    @functools.wraps(append)
    async def plain(
        self: Log, *args: Any, identity: Identity | None = None, window: Any = None, **kwargs: Any
    ) -> Appended:
        if identity is not None:
            raise Misconfigured(
                f"{type(self).__name__} cannot recognise an append it already took "
                "(its append() takes no identity): send with idempotent_sends=False and "
                "without idempotency keys, or use a store that has them"
            )
        ids = await append(self, *args, **kwargs)
        return ids if isinstance(ids, Appended) else Appended(ids)

    return plain
