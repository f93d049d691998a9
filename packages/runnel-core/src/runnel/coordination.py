"""What executors of one processor share through the transport, and how they stay safe.

The transport provides a :class:`Coordination` per processor (membership, control
messages, partition locks, heartbeats) and a :class:`Leadership` per app. Reads and
acknowledgements through a coordination are *fenced*: they happen only on partitions
whose lock the caller holds, checked atomically in the store, so an executor that lost a
lock (paused too long, cut off from Redis) can neither take new events from that partition
nor acknowledge anything on it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runnel.exceptions import Misconfigured
from runnel.transport import Entry

Members = dict[str, dict[str, Any]]
"""executor id -> {"partitions": [...], "host": ..., "pid": ...}"""


@dataclass
class ReadResult:
    entries: list[tuple[str, list[Entry]]] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    """Partition keys whose lock the reader no longer holds (nothing was read from them)."""


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
        """The id of the newest control message (where a new listener starts)."""

    @abc.abstractmethod
    async def control(self, after: bytes, block_ms: int) -> tuple[bytes, list[dict[str, str]]]:
        """Control messages after ``after`` (blocking up to ``block_ms``), and the new position."""

    @abc.abstractmethod
    async def acquire(self, owner: str, partitions: Sequence[int], ttl_ms: int) -> set[int]:
        """Take the locks that are free (or already ours); return the partitions now ours."""

    @abc.abstractmethod
    async def release(self, owner: str, partitions: Sequence[int]) -> None:
        """Give back locks we hold (others' are left alone)."""

    @abc.abstractmethod
    async def beat(self, owner: str, partitions: Sequence[int], ttl_ms: int) -> set[int]:
        """Refresh our heartbeat and extend our locks; return the partitions still ours."""

    @abc.abstractmethod
    async def alive(self, executors: Sequence[str]) -> set[str]:
        """Which of these executors have an unexpired heartbeat."""

    @abc.abstractmethod
    async def lock_owners(self, count: int) -> dict[int, str | None]:
        """Who holds each partition lock (for status)."""

    @abc.abstractmethod
    async def read(
        self, owner: str, consumer: str, positions: Mapping[str, bytes], count: int
    ) -> ReadResult:
        """Like :meth:`Transport.read` without blocking, only from partitions we hold."""

    @abc.abstractmethod
    async def ack(self, owner: str, ids: Mapping[str, Sequence[bytes]]) -> list[str]:
        """Acknowledge on partitions we hold; return the keys we no longer hold (not acked)."""

    # Quarantined partitions (ExceptionPolicy.QUARANTINE), kept where the CLI can see them.

    async def quarantine(self, partition: int, entry_id: str | None, error: str) -> None:
        """Record that ``partition`` stopped on the event ``entry_id`` (and why)."""
        raise Misconfigured(f"{type(self).__name__} cannot record quarantines")

    async def quarantined(self) -> dict[int, dict[str, Any]]:
        """The quarantined partitions: number -> {"id", "error", "since"}."""
        raise Misconfigured(f"{type(self).__name__} cannot record quarantines")

    async def lift(self, partitions: Sequence[int] | None, executor: str) -> list[int]:
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
