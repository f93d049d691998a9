"""Small value types shared by every layer: partitions, events and exception policies."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from runnel.record import Record
    from runnel.store.log import PartitionId

Fields = dict[bytes, bytes]


@enum.unique
class ExceptionPolicy(enum.StrEnum):
    """What a worker does when a processor raises.

    * ``HALT``: the exception propagates: the worker stops processing, finishes and
      acknowledges what is in flight on other partitions, and exits non-zero. The event
      that failed is not acknowledged, so it is delivered again to the next owner.
    * ``QUARANTINE``: the partition is marked poisoned and left alone by this worker;
      every other partition goes on and the worker stays up.
    * ``IGNORE``: the exception is logged, the failed event counts as processed, and
      processing goes on with the next event.
    * ``RETRY``: the failed event (or batch) is tried again in place, with exponential
      backoff, up to the processor's ``retries``; nothing after it is processed
      meanwhile. If it still fails, the processor's ``fallback`` policy applies.
    """

    HALT = "halt"
    QUARANTINE = "quarantine"
    IGNORE = "ignore"
    RETRY = "retry"


class PartitionStream(Protocol):
    """What a partition and its events use of their stream (:class:`runnel.Stream`)."""

    @property
    def name(self) -> str: ...

    @property
    def has_schemas(self) -> bool: ...

    def decode(self, fields: Fields) -> Record: ...

    def key_of(self, record: Record) -> Any: ...

    async def admit(self, events: list[Event]) -> None: ...


@dataclass(eq=False)
class Partition:
    """One partition of a stream: a single ordered log in the transport.

    ``id`` names it to the store; ``key`` is the store's own name for it (for people,
    and for dead letter records).
    """

    stream: PartitionStream
    number: int
    id: PartitionId = field(repr=False)
    key: str = field(repr=False)

    def __repr__(self) -> str:
        return f"<Partition {self.stream.name}[{self.number}]>"


class Event:
    """One entry read from a partition, before it is decoded into a record.

    ``xid`` is the stream entry id, ``data`` the raw field/value pairs as stored,
    ``group`` the consumer group it was read in (the processor's name) and ``recovering``
    whether it was read before and never acknowledged (a redelivery after a crash or a
    rebalance), as in runnel 0.1.
    """

    __slots__ = ("_record", "data", "group", "partition", "recovering", "xid")

    def __init__(
        self,
        partition: Partition,
        xid: bytes,
        data: Fields,
        *,
        group: str = "",
        recovering: bool = False,
    ) -> None:
        self.partition = partition
        self.xid = xid
        self.data = data
        self.group = group
        self.recovering = recovering
        self._record: Record | None = None

    @property
    def record(self) -> Record:
        """The decoded record (decoded once, on first access)."""
        if self._record is None:
            self._record = self.partition.stream.decode(self.data)
        return self._record

    def __repr__(self) -> str:
        xid = self.xid.decode() if isinstance(self.xid, bytes) else self.xid
        return f"<Event {self.partition.stream.name}[{self.partition.number}] {xid}>"
