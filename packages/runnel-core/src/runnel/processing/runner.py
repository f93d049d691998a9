"""The runner: the partitions an executor owns right now, one consumer each, one fetcher."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from runnel.processing.inbox import Inbox
from runnel.runtime.retry import cancel_and_wait
from runnel.types import Partition

if TYPE_CHECKING:
    from runnel.processing.consumer import Consumer
    from runnel.processing.fetcher import Fetcher
    from runnel.store.log import PartitionId

NewConsumer = Callable[[Partition, Inbox], "Consumer"]
"""Makes the consumer of a partition just assigned, reading from its inbox."""

log = logging.getLogger("runnel.runner")


class Runner:
    """Starts a consumer for each partition assigned and stops it when revoked.

    Every consumer task belongs to the runner's task group, so nothing outlives
    :meth:`run`; a revoked partition's consumer gets ``grace_period`` to finish its
    iteration and acknowledge, and is cancelled after that.
    """

    def __init__(
        self,
        fetcher: Fetcher,
        new_consumer: NewConsumer,
        *,
        prefetch: int,
        grace_period: float,
        name: str = "",
        partitions: int = 1,
    ) -> None:
        self.fetcher = fetcher
        self.inboxes: dict[PartitionId, Inbox] = fetcher.inboxes
        self.consumers: dict[int, tuple[Consumer, asyncio.Task[None]]] = {}
        self.new_consumer = new_consumer
        self.prefetch = prefetch
        self.partitions = partitions  # the stream's partition count
        self.grace_period = grace_period
        self.name = name
        self._group: asyncio.TaskGroup | None = None
        self._started = asyncio.Event()
        self._stop = asyncio.Event()
        self._quiet = False

    @property
    def owned(self) -> set[int]:
        return set(self.consumers)

    def stop(self) -> None:
        self.quiesce()
        self._stop.set()

    def quiesce(self) -> None:
        """Let in-flight iterations finish but start no new ones, on any partition."""
        self._quiet = True
        for consumer, _ in self.consumers.values():
            consumer.stop()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            self._group = tg
            self._started.set()
            fetching = tg.create_task(self.fetcher.run(), name="fetcher")
            await self._stop.wait()
            await self.revoke(list(self.consumers))
            # Cancelling a read in flight loses nothing: what it took stays pending in the
            # group and is read again first by the next owner.
            self.fetcher.stop()
            fetching.cancel()

    async def assign(self, partitions: list[Partition]) -> None:
        await self._started.wait()
        assert self._group is not None
        if self._quiet:
            return
        for p in partitions:
            if p.number in self.consumers:
                continue
            inbox = Inbox(p, self.prefetch, self.fetcher.wake_for(p))
            consumer = self.new_consumer(p, inbox)
            self.inboxes[p.id] = inbox
            task = self._group.create_task(consumer.run(), name=f"consumer-{p.number}")
            self.consumers[p.number] = (consumer, task)
        self._size_inboxes()
        self.fetcher.look_again()

    def _size_inboxes(self) -> None:
        """Give each inbox its share of what one executor owning every partition would
        buffer: ``prefetch_count`` times the stream's partitions over the partitions
        owned. So a worker that owns a few partitions still brings many events per read
        and per acknowledgement (a round trip and a fenced check each), and the executor's
        buffers never hold more than a sole owner's would."""
        if not self.inboxes:
            return
        size = self.prefetch * max(1, self.partitions // len(self.inboxes))
        for inbox in self.inboxes.values():
            inbox.capacity = max(size, inbox.least)

    async def restart(self, numbers: list[int]) -> None:
        """Start the (stopped) consumers of these partitions again: they read the
        partition's unacknowledged events first, the one that failed included."""
        partitions = [self.consumers[n][0].partition for n in numbers if n in self.consumers]
        await self.revoke([p.number for p in partitions])
        await self.assign(partitions)

    async def revoke(self, numbers: list[int], graceful: bool = True) -> None:
        """Stop consuming these partitions: in-flight iterations finish (within the grace
        period, if ``graceful``) and what finished is acknowledged."""
        stopping = [self.consumers.pop(n) for n in numbers if n in self.consumers]
        for consumer, _ in stopping:
            consumer.stop()
            self.inboxes.pop(consumer.partition.id, None)
        if stopping and not self._quiet:
            self._size_inboxes()
            self.fetcher.look_again()
        tasks = [task for _, task in stopping]
        if not tasks:
            return
        grace = self.grace_period if graceful else 0
        _, late = await asyncio.wait(tasks, timeout=grace)
        if late:
            log.warning(
                "%d partitions of %s did not finish within %ss; cancelling them",
                len(late),
                self.name,
                grace,
            )
            await cancel_and_wait(late)
