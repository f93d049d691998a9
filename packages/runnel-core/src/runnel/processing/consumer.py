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
    """Feeds one partition's inbox to the processor function, restarting it as the
    exception policy says, and acknowledges what finished on the way out."""

    def __init__(self, executor: Executor, partition: Partition, inbox: Inbox) -> None:
        self.executor = executor
        self.processor = executor.processor
        self.partition = partition
        self.inbox = inbox
        self.acks = Acks(executor, partition.key)
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
            await self.acks.drain()

    async def _run_once(self) -> None:
        """Run the processor function once, until it returns or raises."""
        events = Events(self)
        try:
            await self.processor.func(events)
        except asyncio.CancelledError as exc:
            # Past the grace period: close the pipeline (middleware clean-up) and go.
            try:
                await events.aclose(exc)
            except Exception:
                log.exception("middleware clean-up failed on %r", self.partition)
            raise
        except Exception as exc:
            failure: Exception | None = exc
        else:
            failure = None

        inflight = events.inflight
        try:
            await events.aclose(failure)
        except Exception as exc:
            # A middleware's clean-up failed (a dead-letter send, say): what was in flight
            # is not done. Under IGNORE try it again; otherwise apply the policy.
            log.exception("middleware clean-up failed on %r", self.partition)
            if self.processor.exception_policy is ExceptionPolicy.IGNORE:
                await self._retry_later(inflight)
                return
            failure, inflight = failure or exc, []

        if failure is not None:
            self.acks.stats.failed += 1
            self._handle(failure, inflight)
            return
        # Leaving the loop (return/break) finishes the iteration in flight.
        for event in inflight:
            self.acks.add(event.xid)
        if not self.stopping:
            log.warning("processor %s returned; restarting it", self.processor.name)
            if not events.delivered:
                await asyncio.sleep(RESTART_DELAY)

    def _handle(self, exc: Exception, inflight: list) -> None:
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
