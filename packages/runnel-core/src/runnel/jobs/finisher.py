"""Recording job outcomes in batches (group commit), one store call in flight at a time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from runnel.exceptions import TransportError
from runnel.runtime.retry import Backoff, outage, reraise_if_cancelled
from runnel.text import plural

if TYPE_CHECKING:
    from runnel.jobs.model import Outcome
    from runnel.store.jobs import JobStore

log = logging.getLogger("runnel.jobs")


class Finisher:
    """Records outcomes in batches: while one batch is being sent, the next gathers
    (group commit), so jobs never wait on each other's bookkeeping. One batch is in
    flight at a time; a failed send is tried again with backoff."""

    def __init__(
        self, store: JobStore, executor: str, ttl: float, cancelled: Callable[[str], bool]
    ) -> None:
        self.store = store
        self.executor = executor
        self.results_ttl = ttl
        self.cancelled = cancelled
        """Whether a job was cancelled as its outcome was on the way (refusal expected)."""
        self._pending: list[Outcome] = []
        self._sending: list[Outcome] = []
        self._wake = asyncio.Event()
        self._closing = False

    def add(self, outcome: Outcome) -> None:
        self._pending.append(outcome)
        self._wake.set()

    def close(self) -> None:
        """Return from :meth:`run` once everything added so far is recorded."""
        self._closing = True
        self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def tickets(self) -> set[bytes]:
        """The deliveries whose outcome is waiting or being sent."""
        return {o.ticket for o in self._pending} | {o.ticket for o in self._sending}

    async def last_chance(self, within: float = 1.0) -> None:
        """Stopped at once (a second signal): one quick try to record what is pending, so
        that jobs cancelled mid-run go back uncounted rather than wait for recovery."""
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        try:
            async with asyncio.timeout(within):
                await self.store.finish(self.executor, batch, self.results_ttl)
        except (TransportError, TimeoutError, asyncio.CancelledError) as exc:
            log.warning(
                "%d job outcomes were not recorded (%r); their jobs are taken back once this "
                "worker's heartbeat expires",
                len(batch),
                exc,
            )

    async def run(self) -> None:
        backoff = Backoff()
        while True:
            reraise_if_cancelled()
            if not self._pending:
                if self._closing:
                    return
                await self._wake.wait()
                self._wake.clear()
                continue
            batch, self._pending = self._pending, []
            self._sending = batch
            try:
                refused = await self.store.finish(self.executor, batch, self.results_ttl)
            except asyncio.CancelledError:
                # Stopped at once mid-send: whether it landed is unknown, so the batch
                # stays pending for last_chance (a late outcome is refused by its ticket).
                self._pending = batch + self._pending
                raise
            except TransportError as exc:
                reraise_if_cancelled(exc)
                self._pending = batch + self._pending
                outage.failed(f"recording {plural(len(batch), 'job outcome')}", exc)
                await backoff.sleep()
                continue
            finally:
                self._sending = []
            backoff.reset()
            for job_id in refused:
                if self.cancelled(job_id):
                    log.info("job %s was cancelled; its outcome here is dropped", job_id)
                    continue
                log.warning(
                    "job %s was taken back from this worker while it ran (presumed dead); "
                    "its outcome here is dropped",
                    job_id,
                )
