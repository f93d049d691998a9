"""``Events``: what a processor function iterates over.

Items flow from the partition's inbox through the processor's middleware to the
processor. An item counts as processed when the processor asks for the next one (its loop
iteration finished), and only then is it acknowledged.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from dataclasses import dataclass
from itertools import islice
from time import perf_counter
from typing import TYPE_CHECKING, Any, Generic, Protocol

from typing_extensions import TypeVar

from runnel.exceptions import RunnelError, StateUnavailable, TransportError
from runnel.plugins.instruments import plugin_middleware
from runnel.types import Event, ExceptionPolicy, Partition

if TYPE_CHECKING:
    from runnel.processing.acks import Acks
    from runnel.processing.inbox import Inbox
    from runnel.processing.lease import Lease
    from runnel.processor import Processor
    from runnel.record import Record
    from runnel.stream import Stream
    from runnel.tables.partition import PartitionState


R_co = TypeVar("R_co", bound="Record", default=Any, covariant=True)
"""The records a processor gets: ``Events[Order]`` for a ``Stream[Order]``; a bare
``Events`` annotation means ``Events[Any]``."""
S = TypeVar("S", bound="Record", default=Any)


@dataclass
class Context:
    """Passed to middleware as ``context``: where they run, and why the pipeline closed."""

    partition: Partition
    processor: str
    policy: ExceptionPolicy
    exception: BaseException | None = None


class Feed(Protocol):
    """What :class:`Events` reads from the consumer that runs it."""

    partition: Partition
    processor: Processor
    inbox: Inbox
    acks: Acks
    lease: Lease

    @property
    def stopping(self) -> bool: ...

    def ensure_state(self) -> PartitionState: ...


class Events(Generic[R_co]):
    """The events of one partition, in order, as the processor function receives them.

    * ``async for event in events``: raw :class:`~runnel.Event` objects.
    * ``async for record in events.records()``: decoded records.
    * ``async for batch in events.take(n, within=s)``: lists of up to ``n`` events,
      gathered for at most ``s`` seconds after the first; ``.records()`` for records.
    """

    def __init__(self, consumer: Feed) -> None:
        self._consumer = consumer
        self.partition = consumer.partition
        self.context = Context(
            partition=consumer.partition,
            processor=consumer.processor.name,
            policy=consumer.processor.exception_policy,
        )
        self._generators: list[AsyncGenerator[Any, None]] = []
        # Plugins' middleware (tracing) first, so it sees the user's middleware at work too.
        self._middleware = [*plugin_middleware(consumer.processor), *consumer.processor.middleware]
        self.inflight: list[Event] = []
        self.delivered = 0
        self._delay_head: bytes = b""
        self._delays = 0

    def __repr__(self) -> str:
        return f"<Events {self.partition!r}>"

    # What the processor function uses.

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._pipeline(self._single())

    def records(self) -> AsyncIterator[R_co]:
        if not self._middleware:
            # Nothing between us and the processor needs the events: decode as we go.
            return self._pipeline(self._single(decode=True))
        return self._track(_decode_each(self._pipeline(self._single())))

    async def send(self, stream: Stream[S], *records: S | dict[str, Any]) -> None:
        """Send records to ``stream`` with the event being handled: they are appended
        when it is acknowledged, in the same step, so each exactly once (and not at all
        if its iteration fails), in the order sent, per partition of this stream."""
        await self._consumer.ensure_state().send_records(stream, records)

    async def delay(self, job: Any, *args: Any, **kwargs: Any) -> Any:
        """Enqueue ``job`` (a job function) for the event being handled, under an id made
        of the processor, the partition, the event's id and how many jobs it enqueued
        before: handled again (a redelivery, a retry), the event enqueues the same ids,
        so each job is created once. Returns the job's :class:`~runnel.jobs.JobResult`."""
        head = self.inflight[0].xid if self.inflight else b""
        if head != self._delay_head:
            self._delay_head, self._delays = head, 0
        self._delays += 1
        xid = head.decode() if isinstance(head, bytes) else str(head)
        name = self._consumer.processor.name
        job_id = f"{name}.{self.partition.stream.name}.{self.partition.number}.{xid}.{self._delays}"
        if len(job_id) > 200:
            job_id = hashlib.sha1(job_id.encode()).hexdigest()
        return await job.delay(*args, job_id=job_id, **kwargs)

    def take(self, n: int, within: float) -> Batches[R_co]:
        if n < 1 or within < 0:
            raise ValueError("take(n, within) needs n >= 1 and within >= 0")
        # Room for two whole batches: full batches form without waiting on `within`, and
        # the next one is being read while this one is processed.
        inbox = self._consumer.inbox
        inbox.least = max(inbox.least, 2 * n)
        inbox.capacity = max(inbox.capacity, inbox.least)
        return Batches(self, n, within)

    # The pipeline.

    def _pipeline(self, source: AsyncGenerator[Any, None]) -> AsyncGenerator[Any, None]:
        if self._generators:
            raise RunnelError("an Events object can be iterated only once")
        gen = self._track(source)
        for middleware in self._middleware:
            gen = self._track(
                middleware.handler(gen, partition=self.partition, context=self.context)
            )
        return gen

    def _track(self, gen: Any) -> Any:
        self._generators.append(gen)
        return gen

    async def aclose(self, exception: BaseException | None = None) -> None:
        """Close the pipeline from the processor's end inwards, so every middleware's
        clean-up (``finally`` / ``except GeneratorExit``) runs before we go on."""
        self.context.exception = exception
        errors = []
        for gen in reversed(self._generators):
            try:
                await gen.aclose()
            except Exception as exc:  # user code: a middleware's clean-up failed
                errors.append(exc)
        self._generators.clear()
        if errors:
            raise errors[0]

    async def _ready(self) -> bool:
        """Wait until an event is buffered; False once the consumer is stopping."""
        consumer = self._consumer
        consumer.acks.nudge()  # waiting may take a while: what finished goes now
        if not consumer.inbox.items and not await consumer.inbox.wait():
            return False
        # Start nothing unless our lock is surely still ours: after a pause or while Redis
        # is unreachable, wait for a heartbeat to confirm it (or for the partition to go).
        while not consumer.lease.valid():
            if consumer.stopping:
                return False
            await consumer.lease.renewed()
        return not consumer.stopping

    def _finished(self, items: list[Event]) -> None:
        """The loop iteration over ``items`` is over: they count as processed."""
        add = self._consumer.acks.add
        for event in items:
            add(event.xid)
        self.inflight = []

    async def _single(self, decode: bool = False) -> AsyncGenerator[Any, None]:
        # The hot loop of per-event processing: the slow path (_ready) only when the inbox
        # is empty or the lease needs confirming.
        consumer = self._consumer
        inbox = consumer.inbox
        items = inbox.items
        lease = consumer.lease
        add = consumer.acks.add
        stream_decode = consumer.partition.stream.decode
        stats = consumer.acks.stats
        sample, observe = stats.sample_every, stats.timings.observe  # sample 0: metrics off
        state = consumer.acks.state  # with tables: records decoded once, for their keys too
        added = shrunk = -1  # the inbox's and the cache's counts when the keys were loaded
        while True:
            if consumer.stopping or not items or not lease.valid():
                if not await self._ready():
                    return
            if state is not None and (inbox.added != added or state.shrunk != shrunk):
                # Events came, or the cache lost keys: load the keys of everything buffered.
                new = inbox.added - added if state.shrunk == shrunk else len(items)
                added, shrunk = inbox.added, state.shrunk
                if state.missing(islice(reversed(items), new)):
                    await state_io(state.prefetch(items))
            event = inbox.pop()
            self.inflight = [event]
            self.delivered += 1
            started = perf_counter() if sample and not self.delivered % sample else 0.0
            if state is not None:
                if state.clocks and not state.before_now(self.inflight):
                    await state_io(state.before(self.inflight))
                state.event = event
            if not decode:
                yield event
            else:
                yield stream_decode(event.data) if state is None else event.record
            if started:
                observe(perf_counter() - started)
            if state is not None and state.clocks and not state.after_now(self.inflight):
                await state_io(state.after(self.inflight))
            add(event.xid)  # may raise (a table value that cannot be encoded): still in flight
            self.inflight = []

    async def _batches(
        self, n: int, within: float, decode: bool = False
    ) -> AsyncGenerator[list[Any], None]:
        consumer = self._consumer
        inbox = consumer.inbox
        stream_decode = consumer.partition.stream.decode
        add = consumer.acks.add
        timed, observe = consumer.acks.stats.sample_every > 0, consumer.acks.stats.timings.observe
        while await self._ready():
            batch = inbox.pop_many(n)
            deadline = time.monotonic() + within
            while len(batch) < n and not consumer.stopping:
                if inbox.items:
                    batch += inbox.pop_many(n - len(batch))
                    continue
                remaining = deadline - time.monotonic()
                if len(batch) >= n or remaining <= 0:
                    break
                if not await inbox.wait(timeout=remaining):
                    break
            state = consumer.acks.state
            if state is not None and state.missing(batch):
                await state_io(state.prefetch(batch))
            # Gathering took time: check the lease again before handing the batch over.
            while not consumer.lease.valid() and not consumer.stopping:
                await consumer.lease.renewed()
            if consumer.stopping:
                return  # not started: these stay pending and are delivered again later
            self.inflight = batch
            self.delivered += 1
            started = perf_counter() if timed else 0.0
            if state is not None and state.clocks and not state.before_now(batch):
                await state_io(state.before(batch))
            if not decode:
                yield batch
            elif state is None:
                yield [stream_decode(e.data) for e in batch]
            else:
                yield [e.record for e in batch]
            if started:
                observe(perf_counter() - started)
            if state is not None and state.clocks and not state.after_now(batch):
                await state_io(state.after(batch))
            for event in batch:
                add(event.xid)
            self.inflight = []


async def state_io(step: Awaitable[None]) -> None:
    """A store read of the partition's state: a failure of the store is not the
    processor's (see :class:`~runnel.exceptions.StateUnavailable`)."""
    try:
        await step
    except StateUnavailable:
        raise
    except TransportError as exc:
        raise StateUnavailable(f"the store failed a read of the state: {exc}") from exc


class Batches(Generic[R_co]):
    """``events.take(n, within)``: iterate for lists of events, or ``.records()`` for lists
    of records."""

    def __init__(self, events: Events, n: int, within: float) -> None:
        self._events = events
        self._n = n
        self._within = within

    def __aiter__(self) -> AsyncIterator[list[Event]]:
        return self._events._pipeline(self._events._batches(self._n, self._within))

    def records(self) -> AsyncIterator[list[R_co]]:
        events = self._events
        if not events._middleware:
            # Nothing between us and the processor needs the events: decode as we go.
            return events._pipeline(events._batches(self._n, self._within, decode=True))
        return events._track(_decode_batches(self.__aiter__()))


async def _decode_each(source: AsyncIterator[Event]) -> AsyncGenerator[Record, None]:
    async for event in source:
        yield event.record


async def _decode_batches(source: AsyncIterator[list[Event]]) -> AsyncGenerator[list[Record], None]:
    async for batch in source:
        yield [event.record for event in batch]
