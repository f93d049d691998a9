"""One partition's consumer: runs the processor function and applies the exception policy."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from runnel.processing.acks import Acks
from runnel.processing.events import Events
from runnel.processing.inbox import Inbox
from runnel.types import ExceptionPolicy, Partition

if TYPE_CHECKING:
    from runnel.processing.executor import Executor

log = logging.getLogger("runnel.consumer")

RESTART_DELAY = 1.0
"""Pause before restarting a processor that returned without consuming anything."""


class Consumer:
    def __init__(self, executor: Executor, partition: Partition, inbox: Inbox) -> None:
        self.executor = executor
        self.processor = executor.processor
        self.partition = partition
        self.inbox = inbox
        self.acks = Acks(
            executor.transport, executor.group, partition.key, batch=self.processor.prefetch_count
        )
        self.stopping = False
        self.poisoned = False

    def stop(self) -> None:
        """Finish the iteration in flight, then return (the runner enforces the grace period)."""
        self.stopping = True
        self.inbox.close()

    async def run(self) -> None:
        try:
            while not self.stopping:
                await self._run_once()
        finally:
            await self.acks.flush()

    async def _run_once(self) -> None:
        events = Events(self)
        failure: BaseException | None = None
        try:
            await self.processor.func(events)
        except asyncio.CancelledError as exc:
            failure = exc
            raise
        except Exception as exc:
            failure = exc
        finally:
            inflight = events.inflight
            try:
                await events.aclose(failure)
            except Exception as exc:
                # A middleware's clean-up failed: nothing in flight may be counted done.
                log.exception("middleware clean-up failed on %r", self.partition)
                failure = failure or exc
                if self.processor.exception_policy is ExceptionPolicy.IGNORE:
                    await self._retry_later(inflight)
                    return
                inflight = []

        if failure is None:
            # Leaving the loop (return/break) finishes the iteration in flight.
            for event in inflight:
                self.acks.add(event.xid)
            if not self.stopping:
                log.warning(
                    "processor %s returned while events remain; restarting it", self.processor.name
                )
                if not events.delivered:
                    await asyncio.sleep(RESTART_DELAY)
            return
        self._handle(failure, inflight)

    def _handle(self, exc: BaseException, inflight: list) -> None:
        policy = self.processor.exception_policy
        where = f"processor {self.processor.name!r} on {self.partition!r}"
        if policy is ExceptionPolicy.IGNORE:
            log.error("%s raised; ignoring it and going on", where, exc_info=exc)
            for event in inflight:
                self.acks.add(event.xid)
        elif policy is ExceptionPolicy.QUARANTINE:
            log.error("%s raised; quarantining the partition", where, exc_info=exc)
            self.poisoned = True
            self.stop()
        else:
            log.error("%s raised; halting the worker", where, exc_info=exc)
            self.stop()
            self.executor.halt(exc)

    async def _retry_later(self, inflight: list) -> None:
        """Put unacknowledged events back in front of the inbox, to be tried again in order."""
        self.inbox.items.extendleft(reversed(inflight))
        await asyncio.sleep(RESTART_DELAY)
