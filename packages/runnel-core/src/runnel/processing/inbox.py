"""A bounded buffer of fetched events for one partition, between fetcher and consumer."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING

from runnel.store.log import PENDING, Position
from runnel.types import Event, Partition

if TYPE_CHECKING:
    from runnel.processing.acks import Acks


class Inbox:
    """Holds fewer than twice ``capacity`` events, so memory stays flat on any backlog.

    ``position`` is where the fetcher reads next: first the partition's unacknowledged
    entries (:data:`~runnel.transport.PENDING`), then new entries.
    """

    def __init__(self, partition: Partition, capacity: int, wake: asyncio.Event) -> None:
        self.partition = partition
        self.capacity = capacity
        self.least = 0  # what the consumer needs whatever the runner sizes it to (take(n): 2n)
        self.acks: Acks | None = None  # its finished events, which a read may acknowledge
        self.items: deque[Event] = deque()
        self.position: Position = PENDING
        self.last_id: bytes | None = None  # newest id delivered to the group: where "new" starts
        self.closed = False
        self.added = 0
        """Events put here so far (the consumer checks the keys of new ones only)."""
        self._ready = asyncio.Event()
        self._wake = wake

    @property
    def wants_more(self) -> bool:
        """Half empty: time to read. Refilling at half rather than at the first free slot
        keeps reads large (one round trip brings many events for many partitions) while
        the consumer still has work."""
        return not self.closed and len(self.items) <= self.capacity // 2

    @property
    def has_room(self) -> bool:
        """Worth including in a read that happens anyway."""
        return not self.closed and len(self.items) < self.capacity

    def put(self, events: list[Event]) -> None:
        self.items.extend(events)
        self.added += len(events)
        if self.items:
            self._ready.set()

    def pop(self) -> Event:
        event = self.items.popleft()
        if len(self.items) == self.capacity // 2:
            self._wake.set()
        return event

    def pop_many(self, n: int) -> list[Event]:
        """Up to ``n`` events (at least one must be there)."""
        items = self.items
        low = self.capacity // 2
        was = len(items)
        if n >= was:
            taken = list(items)
            items.clear()
        else:
            taken = [items.popleft() for _ in range(n)]
        if len(items) <= low < was:
            self._wake.set()
        return taken

    def close(self) -> None:
        """Stop accepting events and wake a waiting consumer."""
        self.closed = True
        self._ready.set()

    async def wait(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait until an event is buffered; False when closed or timed out with none."""
        while not self.items:
            if self.closed:
                return False
            self._ready.clear()
            if timeout is None:
                await self._ready.wait()
            else:
                try:
                    async with asyncio.timeout(timeout):
                        await self._ready.wait()
                except TimeoutError:
                    return bool(self.items)
        return True
