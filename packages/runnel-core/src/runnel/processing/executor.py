"""The executor: runs one processor over the partitions of its stream."""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import TYPE_CHECKING

from runnel.processing.retry import retrying
from runnel.processing.runner import Runner

if TYPE_CHECKING:
    from runnel.processing.worker import Worker
    from runnel.processor import Processor

log = logging.getLogger("runnel.executor")

CONSUMER_NAME = "runnel"
"""The consumer-group consumer every owner reads as.

Ownership of a partition is decided by Runnel, not by the consumer group, so all owners
share one consumer name: the partition's unacknowledged entries are then always "ours" to
re-read, in order, whoever read them first.
"""


class Executor:
    def __init__(self, worker: Worker, processor: Processor) -> None:
        self.worker = worker
        self.processor = processor
        self.transport = processor.app.transport
        self.group = processor.name
        self.consumer_name = CONSUMER_NAME
        self.runner: Runner | None = None
        self._stop = asyncio.Event()

    def __repr__(self) -> str:
        return f"<Executor {self.processor.name}>"

    def stop(self) -> None:
        self._stop.set()
        if self.runner is not None:
            self.runner.stop()

    def halt(self, exc: BaseException) -> None:
        """HALT policy: a processor failed, so this worker stops (and exits non-zero)."""
        self.worker.stop(exit_code=1, reason=f"processor {self.processor.name!r} failed: {exc!r}")

    async def _setup(self, keys: list[str]) -> None:
        transport = self.transport
        await retrying(lambda: transport.ensure_group(keys, self.group), "creating consumer groups")
        for key in keys:
            moved = await retrying(
                partial(transport.adopt_pending, key, self.group, self.consumer_name),
                "adopting pending events",
            )
            if moved:
                log.info("%s: %d unacknowledged events will be redelivered first", key, moved)

    async def run(self) -> None:
        stream = self.processor.stream
        partitions = stream.partitions
        keys = [p.key for p in partitions]
        setup = asyncio.create_task(self._setup(keys))
        stopping = asyncio.create_task(self._stop.wait())
        await asyncio.wait([setup, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not setup.done():
            setup.cancel()  # stopped while the transport was unreachable
            await asyncio.gather(setup, return_exceptions=True)
            return
        setup.result()
        self.runner = Runner(self, partitions)
        log.info(
            "processor %s consuming %d partitions of %s",
            self.processor.name,
            len(partitions),
            stream.name,
        )
        await self.runner.run()
