"""Enqueuing many jobs at once: concurrent ``delay()`` calls share a store call.

A web server's requests, or ``asyncio.gather`` over many ``delay()``, each enqueue one
job; sent one by one they would cost a round trip each. What is submitted during one
turn of the event loop goes to :meth:`JobStore.enqueue` in one call (split over the
senders free, at most :data:`SENDS_IN_FLIGHT` in flight). A lone caller waits one round
trip, as with ``enqueue``; many callers cost a round trip per batch instead of one each.

Each store call carries its own :class:`~runnel.store.identity.CallIdentity` (given a
producer: ``idempotent_sends``), and one whose reply was lost is sent again as it was
(``send_retries``): the store recognises the jobs that call stored, so every caller
gets its job, stored once, as if the reply had come. The jobs' ids are made before the
first try (:meth:`JobFunction.prepare`), so a retry names the same jobs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from runnel import resend
from runnel.jobs.model import NewJob
from runnel.store.identity import CallIdentity, Producer
from runnel.store.jobs import JobStore

T = TypeVar("T")

BATCH_LIMIT = 500
"""Most jobs one coalesced enqueue sends in one call."""
SENDS_IN_FLIGHT = 2
"""Coalesced enqueue calls in flight at once: while Redis stores one batch, the callers of
the other prepare their next jobs."""


class EnqueueBatches:
    """Submits jobs to one store, coalescing concurrent submissions (one event loop)."""

    def __init__(self, store: JobStore, producer: Producer | None = None, retries: int = 0) -> None:
        self.store = store
        self.producer = producer
        """Gives each store call its identity; None: calls carry none, none is retried."""
        self.retries = retries
        self._batch: list[tuple[NewJob, asyncio.Future[bool]]] = []
        self._launching = False
        self._sends: set[asyncio.Task[None]] = set()

    async def submit(self, job: NewJob) -> bool:
        """Enqueue one job, sharing a call with others submitted meanwhile; False if
        its id existed already."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._batch.append((job, future))
        if not self._launching:
            self._launching = True
            loop.call_soon(self._launch)
        return await future

    def _launch(self) -> None:
        self._launching = False
        free = SENDS_IN_FLIGHT - len(self._sends)
        if not self._batch or free <= 0:
            return  # a send in flight launches the rest when it is done
        size = min(BATCH_LIMIT, -(-len(self._batch) // free))
        for _ in range(free):
            if not self._batch:
                break
            chunk, self._batch = self._batch[:size], self._batch[size:]
            task = asyncio.get_running_loop().create_task(self._send(chunk), name="runnel-enqueue")
            self._sends.add(task)
            task.add_done_callback(self._sent)

    async def _send(self, chunk: list[tuple[NewJob, asyncio.Future[bool]]]) -> None:
        try:
            jobs = [job for job, _ in chunk]

            def enqueue(call: CallIdentity | None) -> Awaitable[list[bool]]:
                if call is None:
                    return self.store.enqueue(jobs)
                return self.store.enqueue(jobs, call=call)

            what = f"enqueuing {len(jobs)} jobs"
            producer = self.producer if self.store.identities else None
            added = await identified(producer, self.retries, enqueue, what)
        except BaseException as exc:
            for _, future in chunk:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), new in zip(chunk, added, strict=True):
            if not future.done():
                future.set_result(new)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sends.discard(task)
        if self._batch and not self._launching:
            self._launching = True
            asyncio.get_running_loop().call_soon(self._launch)


async def identified(
    producer: Producer | None,
    retries: int,
    send: Callable[[CallIdentity | None], Awaitable[T]],
    what: str,
) -> T:
    """``send(call)`` under a new call identity of ``producer``, sent again (the same
    identity) while its reply is lost, up to ``retries`` times; ``send(None)`` once if
    there is no ``producer`` (``idempotent_sends`` off, a store without identities)."""
    if producer is None:
        return await send(None)
    call = producer.call()
    return await resend.resending(
        lambda again: send(call.retried() if again else call), retries, what
    )
