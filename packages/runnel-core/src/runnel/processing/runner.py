"""The runner: one fetcher plus one consumer per owned partition, started and stopped together."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from runnel.processing.consumer import Consumer
from runnel.processing.fetcher import Fetcher
from runnel.processing.inbox import Inbox
from runnel.types import Partition

if TYPE_CHECKING:
    from runnel.processing.executor import Executor

log = logging.getLogger("runnel.runner")


class Runner:
    def __init__(self, executor: Executor, partitions: list[Partition]) -> None:
        self.executor = executor
        processor = executor.processor
        space = asyncio.Event()
        self.inboxes = {p.key: Inbox(p, processor.prefetch_count, space) for p in partitions}
        self.consumers = [Consumer(executor, box.partition, box) for box in self.inboxes.values()]
        self.fetcher = Fetcher(executor, self.inboxes, space)
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        grace = self.executor.processor.grace_period
        async with asyncio.TaskGroup() as tg:
            fetching = tg.create_task(self.fetcher.run(), name="fetcher")
            consuming = [
                tg.create_task(c.run(), name=f"consumer-{c.partition.number}")
                for c in self.consumers
            ]
            await self._stop.wait()

            # Graceful stop: no new reads, in-flight iterations get `grace` seconds to finish
            # (each consumer acknowledges what finished on its way out), then cancel the rest.
            # Cancelling a read in flight loses nothing: entries it took stay pending in the
            # group and are read again first by the next owner.
            self.fetcher.stop()
            fetching.cancel()
            for consumer in self.consumers:
                consumer.stop()
            _, late = await asyncio.wait(consuming, timeout=grace)
            if late:
                log.warning(
                    "%d partitions of %s did not finish within grace_period=%ss; cancelling them",
                    len(late),
                    self.executor.processor.name,
                    grace,
                )
                for task in late:
                    task.cancel()
