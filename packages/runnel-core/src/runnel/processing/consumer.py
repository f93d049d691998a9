"""One partition's consumer: runs the processor function and applies the exception policy."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from runnel import context
from runnel.exceptions import RunnelError, StateUnavailable, TransportError
from runnel.processing.acks import Acks
from runnel.processing.events import Events
from runnel.processing.failures import failure_fields, failure_text, retry_delay
from runnel.processing.inbox import Inbox
from runnel.runtime.retry import Backoff, outage, reraise_if_cancelled
from runnel.tables import table as tables
from runnel.types import Event, ExceptionPolicy, Partition

if TYPE_CHECKING:
    from runnel.processing.lease import Lease
    from runnel.processor import Processor
    from runnel.store.log import PartitionId
    from runnel.tables.partition import PartitionState

Halt = Callable[[BaseException], None]
"""Told that a processor failed under ``HALT``: the worker stops."""

Quarantine = Callable[["PartitionId", "str | None", str], Awaitable[None]]
"""Records a quarantined partition where the CLI sees it (``Coordination.quarantine``)."""

log = logging.getLogger("runnel.consumer")

RESTART_DELAY = 1.0
"""Pause before restarting a processor that returned without consuming anything."""


class Consumer:
    """Feeds one partition's inbox to the processor function, restarting it as the
    exception policy says, and acknowledges what finished on the way out."""

    def __init__(
        self,
        processor: Processor,
        partition: Partition,
        inbox: Inbox,
        acks: Acks,
        lease: Lease,
        *,
        halt: Halt,
        quarantine: Quarantine,
        make_state: Callable[[], PartitionState | None] | None = None,
    ) -> None:
        self.processor = processor
        self.partition = partition
        self.inbox = inbox
        self.acks = acks
        self.lease = lease
        self._halt = halt
        self._quarantine = quarantine
        self._make_state = make_state
        self.stopping = False
        self.poisoned = False
        self._failing: bytes | None = None  # under RETRY: the first event of the failed iteration
        self._attempts = 0  # how often it failed in a row
        self._woken = asyncio.Event()
        self._state_backoff = Backoff()

    def stop(self) -> None:
        """Finish the iteration in flight, then return (the runner enforces the grace period)."""
        self.stopping = True
        self.inbox.close()
        self._woken.set()  # a retry's backoff ends early: its events stay unacknowledged

    @property
    def state(self) -> PartitionState | None:
        """The partition's tables, if its stream has any."""
        return self.acks.state

    def ensure_state(self) -> PartitionState:
        """The partition's state, made now if its stream has no tables (for sends)."""
        state = self.acks.state
        if state is None:
            made = self._make_state() if self._make_state is not None else None
            if made is None:
                raise RunnelError("this store cannot commit what a processor sends")
            state = self.acks.state = made
            tables.current.set(state)
        return state

    async def run(self) -> None:
        context.stream.set(self.partition.stream.name)
        context.partition_id.set(self.partition.number)
        context.executor_id.set(self.processor.name)
        tables.current.set(self.acks.state)  # this task's table[key] means this partition
        if self.acks.state is not None:
            self.acks.state.attach()
        try:
            while not self.stopping:
                await self._run_once()
        finally:
            try:
                await self.acks.drain()
            finally:
                if self.acks.state is not None:
                    self.acks.state.detach()

    async def _run_once(self) -> None:
        """Run the processor function once, until it returns or raises."""
        events = Events(self)
        try:
            await self.processor.func(events)
        except asyncio.CancelledError as exc:
            # Past the grace period: close the pipeline (middleware clean-up) and go.
            try:
                await events.aclose(exc)
            except Exception:  # user code (middleware): report it, still go
                log.exception("middleware clean-up failed on %r", self.partition)
            raise
        except Exception as exc:  # user code: the exception policy decides
            failure: Exception | None = exc
        else:
            failure = None

        inflight = events.inflight
        if failure is not None and self.acks.state is not None:
            self.acks.state.rollback()  # the failed iteration's table changes never happened
        if isinstance(failure, StateUnavailable):
            await self._state_unavailable(events, failure, inflight)
            return
        self._state_backoff.reset()
        policy = self._policy_for(inflight) if failure is not None else None
        if policy is not None:
            events.context.policy = policy  # what the middleware's clean-up acts on
        try:
            await events.aclose(failure)
        except Exception as exc:  # user code (middleware clean-up)
            # A middleware's clean-up failed (a dead-letter send, say): what was in flight
            # is not done. Under IGNORE try it again; otherwise apply the policy.
            fields = failure_fields(self.processor.name, self.partition, inflight)
            log.exception("middleware clean-up failed: %s", failure_text(fields), extra=fields)
            if failure is None:
                failure, policy = exc, self._policy_for(inflight)
                if self.acks.state is not None:
                    self.acks.state.rollback()
            if policy is ExceptionPolicy.IGNORE:
                await self._retry_later(inflight)
                return

        if failure is not None:
            self.acks.stats.failed += 1
            assert policy is not None
            await self._handle(failure, inflight, policy)
            return
        # Leaving the loop (return/break) finishes the iteration in flight.
        for event in inflight:
            self.acks.add(event.xid)
        if not self.stopping:
            log.warning("processor %s returned; restarting it", self.processor.name)
            if not events.delivered:
                await asyncio.sleep(RESTART_DELAY)

    async def _state_unavailable(
        self, events: Events, failure: StateUnavailable, inflight: list[Event]
    ) -> None:
        """The store failed a read the state needed: not the processor's failure. Its
        events go back in front of the inbox, to be handled again after a backoff."""
        events.context.policy = ExceptionPolicy.RETRY  # what the middleware sees: a retry
        try:
            await events.aclose(failure)
        except Exception:  # user code (middleware clean-up): report it, still retry
            log.exception("middleware clean-up failed on %r", self.partition)
        outage.failed(f"reading the state of {self.partition!r}", failure.__cause__ or failure)
        self.inbox.items.extendleft(reversed(inflight))
        try:
            async with asyncio.timeout(self._state_backoff.delay):
                await self._woken.wait()
        except TimeoutError:
            pass
        self._state_backoff.delay = min(self._state_backoff.delay * 2, 5.0)

    def _policy_for(self, inflight: list[Event]) -> ExceptionPolicy:
        """The policy for this failure: under RETRY, the fallback once retries run out."""
        processor = self.processor
        if processor.exception_policy is not ExceptionPolicy.RETRY:
            return processor.exception_policy
        head = inflight[0].xid if inflight else None
        if head == self._failing and self._attempts:
            self._attempts += 1
        else:
            self._failing, self._attempts = head, 1
        if self._attempts <= processor.retries:
            return ExceptionPolicy.RETRY
        return processor.fallback

    async def _handle(self, exc: Exception, inflight: list[Event], policy: ExceptionPolicy) -> None:
        fields = failure_fields(self.processor.name, self.partition, inflight)
        where = failure_text(fields)
        said = "raised"  # or, giving up under RETRY: how often it failed
        gave_up = self.processor.exception_policy is ExceptionPolicy.RETRY and self._attempts
        if policy is not ExceptionPolicy.RETRY and gave_up:
            if self._attempts > 1:
                said = f"failed {self._attempts} times in a row"
            self._failing, self._attempts = None, 0
        if policy is ExceptionPolicy.RETRY:
            await self._retry(exc, inflight, where, fields)
        elif policy is ExceptionPolicy.IGNORE:
            log.error("%s %s; ignoring it and going on", where, said, exc_info=exc, extra=fields)
            for event in inflight:
                self.acks.add(event.xid)
        elif policy is ExceptionPolicy.QUARANTINE:
            log.error("%s %s; quarantining the partition", where, said, exc_info=exc, extra=fields)
            self.stop()
            await self._record_quarantine(fields["entry_id"], exc)
            self.poisoned = True  # after the record: a resume looks for poisoned ones without
        else:
            log.error("%s %s; halting the worker", where, said, exc_info=exc, extra=fields)
            self.stop()
            self._halt(exc)

    async def _retry(self, exc: Exception, inflight: list[Event], where: str, fields: dict) -> None:
        """Put the failed events back in front of the inbox and wait out the backoff (a
        stop cuts it short: they stay unacknowledged and are delivered again later)."""
        processor = self.processor
        delay = retry_delay(
            self._attempts,
            processor.retry_backoff,
            processor.retry_backoff_cap,
            processor.retry_jitter,
        )
        log.warning(
            "%s raised %r; retry %d of %d in %.2fs",
            where,
            exc,
            self._attempts,
            processor.retries,
            delay,
            extra={**fields, "attempt": self._attempts},
        )
        self.inbox.items.extendleft(reversed(inflight))
        try:
            async with asyncio.timeout(delay):
                await self._woken.wait()
        except TimeoutError:
            pass

    async def _record_quarantine(self, entry_id: str | None, exc: Exception) -> None:
        """Where ``runnel status`` sees it, and ``runnel processor skip/resume`` lift it."""
        try:
            await self._quarantine(self.partition.id, entry_id, f"{type(exc).__name__}: {exc}")
        except TransportError as err:
            reraise_if_cancelled()
            log.warning("could not record the quarantine of %r: %r", self.partition, err)

    async def _retry_later(self, inflight: list) -> None:
        """Put unacknowledged events back in front of the inbox, to be tried again in order."""
        self.inbox.items.extendleft(reversed(inflight))
        await asyncio.sleep(RESTART_DELAY)
