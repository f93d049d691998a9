"""What executors of one processor share through the transport, and how they stay safe.

The transport provides a :class:`Coordination` per processor (membership, control
messages, partition locks, heartbeats) and a :class:`Leadership` per app. Reads and
acknowledgements through a coordination are *fenced*: they happen only on partitions
whose lock the caller holds, checked atomically in the store, so an executor that lost a
lock (paused too long, cut off from its store) can neither take new events from that
partition nor acknowledge anything on it.

Partitions are named by :class:`~runnel.transport.PartitionId` here as in the transport;
a coordination serves one stream, so it is given only that stream's partitions.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runnel.exceptions import Misconfigured
from runnel.store.log import Entry, PartitionId, Position
from runnel.store.state import Commit


@dataclass
class Member:
    """One executor's record in a processor's membership.

    Stored as JSON ``{"partitions", "host", "pid", "worker", ...}``; fields this version
    does not know (written by another one) are kept in ``extra`` and written back.
    """

    partitions: list[int] = field(default_factory=list)
    host: str | None = None
    pid: int | None = None
    worker: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        known = {"host": self.host, "pid": self.pid, "worker": self.worker}
        return {
            **self.extra,
            **{k: v for k, v in known.items() if v is not None},
            "partitions": list(self.partitions),
        }

    @classmethod
    def from_json(cls, data: Any) -> Member:
        if not isinstance(data, dict):
            return cls()
        extra = {k: v for k, v in data.items() if k not in _MEMBER_FIELDS}
        partitions = data.get("partitions")
        return cls(
            partitions=[int(p) for p in partitions] if isinstance(partitions, list) else [],
            host=data.get("host"),
            pid=data.get("pid"),
            worker=data.get("worker"),
            extra=extra,
        )


_MEMBER_FIELDS = frozenset({"partitions", "host", "pid", "worker"})

Members = dict[str, Member]
"""executor id -> its record"""


def members_to_json(members: Members) -> dict[str, Any]:
    return {k: m.to_json() for k, m in members.items()}


def members_from_json(data: Any) -> Members:
    """The membership from its stored JSON (anything else: nobody)."""
    if not isinstance(data, dict):
        return {}
    return {str(k): Member.from_json(v) for k, v in data.items()}


@dataclass
class Quarantine:
    """Why a partition stopped: the event it stopped on, the error, and when (epoch s)."""

    id: str | None
    error: str
    since: float


@dataclass
class ReadResult:
    entries: list[tuple[PartitionId, list[Entry]]] = field(default_factory=list)
    lost: list[PartitionId] = field(default_factory=list)
    """Partitions whose lock the reader no longer holds (nothing was read from them)."""


class Coordination(abc.ABC):
    """Shared state of the executors of one processor."""

    @abc.abstractmethod
    async def members(self) -> Members:
        """The current membership (executor id -> its record)."""

    @abc.abstractmethod
    async def change_members(
        self, change: Callable[[Members], Members], reason: str, executor: str
    ) -> Members:
        """Under the admin lock: read the membership, apply ``change``, write it back and
        announce ``reason`` on the control stream. Returns the new membership."""

    @abc.abstractmethod
    async def announce(self, reason: str, executor: str) -> None:
        """Add a message to the control stream."""

    @abc.abstractmethod
    async def control_tail(self) -> bytes:
        """A cursor after the newest control message (where a new listener starts);
        opaque: only given back to :meth:`control`."""

    @abc.abstractmethod
    async def control(self, after: bytes, block_ms: int) -> tuple[bytes, list[dict[str, str]]]:
        """Control messages after the cursor ``after`` (blocking up to ``block_ms``), and
        the new cursor."""

    @abc.abstractmethod
    async def acquire(
        self, owner: str, partitions: Sequence[PartitionId], ttl_ms: int
    ) -> set[PartitionId]:
        """Take the locks that are free (or already ours); return the partitions now ours."""

    @abc.abstractmethod
    async def release(self, owner: str, partitions: Sequence[PartitionId]) -> None:
        """Give back locks we hold (others' are left alone)."""

    @abc.abstractmethod
    async def beat(
        self, owner: str, partitions: Sequence[PartitionId], ttl_ms: int
    ) -> set[PartitionId]:
        """Refresh our heartbeat and extend our locks; return the partitions still ours."""

    @abc.abstractmethod
    async def alive(self, executors: Sequence[str]) -> set[str]:
        """Which of these executors have an unexpired heartbeat."""

    @abc.abstractmethod
    async def lock_owners(self, partitions: Sequence[PartitionId]) -> dict[PartitionId, str | None]:
        """Who holds each partition lock (for status)."""

    @abc.abstractmethod
    async def read(
        self, owner: str, consumer: str, positions: Mapping[PartitionId, Position], count: int
    ) -> ReadResult:
        """Read up to ``count`` entries per partition from each position (see
        :class:`~runnel.transport.Position`), as ``consumer`` of the processor's group,
        without blocking, only from partitions whose lock ``owner`` holds."""

    @abc.abstractmethod
    async def ack(
        self, owner: str, ids: Mapping[PartitionId, Sequence[bytes]]
    ) -> list[PartitionId]:
        """Acknowledge on partitions we hold; return those we no longer hold (not acked)."""

    async def read_and_ack(
        self,
        owner: str,
        consumer: str,
        positions: Mapping[PartitionId, Position],
        count: int,
        ids: Mapping[PartitionId, Sequence[bytes]],
    ) -> tuple[ReadResult, list[PartitionId]]:
        """:meth:`ack` ``ids``, then :meth:`read`: the read, and the partitions whose ids
        were not acknowledged (lost). A store that can fences both with one check, in one
        exchange."""
        lost = await self.ack(owner, ids) if ids else []
        result = await self.read(owner, consumer, positions, count) if positions else ReadResult()
        return result, lost

    commits_ride = False
    """Whether :meth:`read_and_commit` commits in the read's own exchange, so that a
    partition's table writes may wait for its next read rather than go on their own."""

    async def read_and_commit(
        self,
        owner: str,
        consumer: str,
        positions: Mapping[PartitionId, Position],
        count: int,
        commits: Mapping[PartitionId, Commit],
    ) -> tuple[ReadResult, list[PartitionId]]:
        """:meth:`commit` ``commits``, then :meth:`read`: the read, and the partitions
        whose commits were not applied (lost). A store that can (:attr:`commits_ride`)
        fences both with one check, in one exchange."""
        lost = await self.commit(owner, commits) if commits else []
        result = await self.read(owner, consumer, positions, count) if positions else ReadResult()
        return result, lost

    async def commit(self, owner: str, commits: Mapping[PartitionId, Commit]) -> list[PartitionId]:
        """Apply each partition's :class:`~runnel.store.state.Commit` (its acknowledgements,
        its table writes and its outputs together, all or none) on the partitions we
        hold; return those we no longer hold (nothing of theirs applied). Applying a
        commit's writes twice leaves what once does (values are stored, not added to);
        its outputs are appended once (or kept for :meth:`relay`)."""
        if any(c.writes or c.sends for c in commits.values()):
            raise Misconfigured(f"{type(self).__name__} cannot store tables or outputs")
        return await self.ack(owner, {p: c.ids for p, c in commits.items()})

    async def relay(self, partitions: Sequence[PartitionId]) -> int:
        """Deliver what committed outputs of these partitions wait for delivery (a store
        that cannot append them in the commit itself keeps them in an outbox); how many
        were appended now. Each is appended once, in commit order per partition, whoever
        relays and however often. A store that appends in the commit: nothing to do."""
        return 0

    # Quarantined partitions (ExceptionPolicy.QUARANTINE), kept where the CLI can see them.

    async def quarantine(self, partition: PartitionId, entry_id: str | None, error: str) -> None:
        """Record that ``partition`` stopped on the event ``entry_id`` (and why)."""
        raise Misconfigured(f"{type(self).__name__} cannot record quarantines")

    async def quarantined(self) -> dict[PartitionId, Quarantine]:
        """The quarantined partitions of this processor."""
        raise Misconfigured(f"{type(self).__name__} cannot record quarantines")

    async def lift(
        self, partitions: Sequence[PartitionId] | None, executor: str
    ) -> list[PartitionId]:
        """Lift the quarantine of ``partitions`` (all when None) and announce ``resume`` on
        the control stream, so their owners start them again; return those lifted."""
        raise Misconfigured(f"{type(self).__name__} cannot record quarantines")


class Leadership(abc.ABC):
    """One leader per app, elected by an expiring key."""

    @abc.abstractmethod
    async def claim(self, candidate: str, ttl_ms: int) -> bool:
        """Become (or stay) leader if nobody else is; True if ``candidate`` leads now."""

    @abc.abstractmethod
    async def resign(self, candidate: str) -> None:
        """Stop leading (only if ``candidate`` leads)."""

    @abc.abstractmethod
    async def leader(self) -> str | None:
        """Who leads now, if anyone."""
