"""The job queue role of a store: the interface between the job queue and the store
that keeps its state.

The core decides *what* happens to a job (run it, retry it when, bury it); a store
plugin decides how that is kept. A store must apply each call atomically: an outcome is
recorded together with the job's removal from the queue, so a worker that dies between
two calls leaves every job either still in the queue or finished, never both or neither.

Deliveries are *fenced*: an outcome names the delivery's ticket, and is applied only if
that delivery is still outstanding. A job taken back from an executor presumed dead (it
stopped beating) gets a new ticket, so the paused executor's late outcome is refused.

Jobs are in named queues (``NewJob.queue``; :data:`runnel.jobs.queues.DEFAULT_QUEUE` for
all that name none). A job stays in its queue for life: a retry, a job put back and a
replayed dead letter go back to the queue it came from. Calls that do not name queues
(promoting due jobs, recovery, counts, dead letters) cover every queue the store holds.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from runnel.jobs.clock import Clock
from runnel.jobs.limits import Deferral, JobLimits
from runnel.jobs.model import (
    Abandoned,
    DeadLetter,
    Delivery,
    ExecutorState,
    JobRecord,
    JobStatus,
    NewJob,
    Outcome,
    Progress,
    QueueCounts,
)
from runnel.jobs.queues import DEFAULT_QUEUE, TakePlan
from runnel.store.identity import CallIdentity


class JobStore(abc.ABC):
    """The queue, schedule, dead letters, results and executor registry of one app."""

    identities: ClassVar[bool] = True
    """Whether :meth:`enqueue` (and ``enqueue_workflow``, if the store has it) take a
    call's identity; set per class from their signatures. Without, an enqueue whose
    reply was lost is not sent again (the caller gets the doubt)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        methods = [getattr(cls, name, None) for name in ("enqueue", "enqueue_workflow")]
        cls.identities = all(
            "call" in inspect.signature(method).parameters
            for method in methods
            if method is not None
        )

    # Enqueuing.

    @abc.abstractmethod
    async def enqueue(
        self, jobs: Sequence[NewJob], *, call: CallIdentity | None = None
    ) -> list[bool]:
        """Store these jobs, each on the queue or (``due``) on the schedule, status SENT.

        A job whose id exists already is left alone (``False``), whatever its status:
        enqueuing one id twice runs it once. ``call`` identifies this call, sent again
        as it was when its reply was lost: the store keeps it with each job it stores,
        and a job it finds stored by the same call is ``True`` again, so the caller
        cannot tell the retry from the first try.
        """

    # Periodic jobs.

    @abc.abstractmethod
    async def last_ticks(self, names: Sequence[str]) -> dict[str, float | None]:
        """Each periodic job's last settled tick (seconds; None if never settled)."""

    @abc.abstractmethod
    async def settle_ticks(
        self, name: str, last: float | None, tick: float, jobs: Sequence[NewJob]
    ) -> tuple[bool, float | None]:
        """Move the periodic job ``name``'s last settled tick from ``last`` to ``tick`` and
        enqueue ``jobs`` (as :meth:`enqueue` does), in one atomic step; ``(True, tick)``.

        If the stored last tick is not ``last`` (another worker settled meanwhile), change
        nothing and return ``(False, the stored last tick)``: so the workers racing for one
        tick enqueue its job once.
        """

    # Running jobs.

    @abc.abstractmethod
    async def take(
        self,
        executor: str,
        count: int,
        block_ms: int,
        clock: Clock,
        queues: TakePlan | None = None,
    ) -> list[Delivery]:
        """Take up to ``count`` queued jobs for ``executor`` and mark them EXECUTING (try
        counted, started at ``clock.now()``), waiting up to ``block_ms`` for one to arrive
        if none is queued.

        ``queues`` (None: the default queue alone) names the queues to take from, each
        with a quota: first up to its quota from each queue in the order given, then, while
        fewer than ``count`` are taken, as many as are left from each queue in the same
        order. All in one step: with ``[("critical", n), ("bulk", n)]`` a bulk job is
        taken only if no critical job was queued. Each delivery names its queue.
        """

    @abc.abstractmethod
    async def finish(
        self,
        executor: str,
        outcomes: Sequence[Outcome],
        results_ttl: float,
        *,
        only_if_dead: bool = False,
    ) -> list[str]:
        """Record outcomes of ``executor``'s deliveries; return the ids of those refused
        (the delivery was taken back or finished already).

        ``only_if_dead``: recovery on behalf of an executor presumed dead; refuse all if
        its heartbeat is fresh again. A successful result (and the job's record) expire
        after ``results_ttl`` seconds; a dead job's are kept until replayed or purged.
        """

    @abc.abstractmethod
    async def report_progress(self, executor: str, job_id: str, progress: Progress) -> bool:
        """Keep ``progress`` with the job, if ``executor`` still runs its try
        ``progress.tries``; False (nothing kept) if not: it was cancelled or taken back."""

    async def admit(
        self, executor: str, delivery: Delivery, limits: JobLimits, now: float, wait: float
    ) -> Deferral | str | None:
        """Let ``executor`` start a delivery of a job declared with limits, in one atomic step
        (only such jobs call this; :mod:`runnel.jobs.limits`).

        None: admitted; it holds a concurrency slot (``limits.concurrency``) until an
        outcome naming it (``Outcome.slot``) is recorded, it is cancelled, or ``executor``
        stops beating. A :class:`Deferral`: refused by the rate (by the store's own clock)
        or by full slots (slots of executors that stopped beating are freed first); the
        delivery ended, its try not counted, the job is back on the schedule, due at
        ``now`` plus the time to the next token (rate) or ``wait`` (concurrency), and its
        record says why (``JobRecord.waiting``). ``"gone"``: the delivery is no longer
        ``executor``'s (cancelled or taken back).
        """
        raise NotImplementedError(f"{type(self).__name__} does not support job limits")

    @abc.abstractmethod
    async def promote_due(self, now: float, limit: int) -> int:
        """Move up to ``limit`` scheduled jobs due by ``now`` onto the queue; how many moved."""

    # Executors.

    @abc.abstractmethod
    async def prepare(self, queues: Sequence[str] = (DEFAULT_QUEUE,)) -> None:
        """Create what workers read from in these queues (idempotent); called when an
        executor starts."""

    @abc.abstractmethod
    async def beat(self, executor: str, info: Mapping[str, Any], ttl: float) -> None:
        """Announce ``executor`` alive for ``ttl`` seconds, describing itself with ``info``."""

    @abc.abstractmethod
    async def executors(self) -> list[ExecutorState]:
        """Every executor that registered and was not forgotten, alive or not."""

    @abc.abstractmethod
    async def abandoned(self, executor: str, limit: int) -> list[Abandoned]:
        """Up to ``limit`` deliveries still outstanding for ``executor``."""

    @abc.abstractmethod
    async def forget(self, executor: str) -> bool:
        """Drop an executor that holds no deliveries; False if it still holds some or is
        alive again."""

    @abc.abstractmethod
    async def leave(self, executor: str) -> None:
        """A stopping executor: drop its heartbeat, and forget it if it holds nothing
        (else others take its deliveries back, as from one that died)."""

    # Cancelling.

    @abc.abstractmethod
    async def cancel(self, job_id: str, at: float, results_ttl: float) -> JobStatus:
        """Cancel the job unless it has ended, in one atomic step; return the status it had.

        SENT or RETRY (queued or scheduled): it leaves the queue or schedule and will never
        be taken. EXECUTING: its delivery ends here, so the worker's own outcome is then
        refused, and the executor running it is told (:meth:`cancelled`). Either way the
        status becomes CANCELLED (``finished`` = ``at``), the result item (if the job keeps
        results) says so, and both expire after ``results_ttl``. A job that ended (SUCCESS,
        DEAD, CANCELLED) is left as it is; UNKNOWN means there is no such job.
        """

    @abc.abstractmethod
    async def cancelled(self, executor: str, within: float) -> list[str]:
        """The ids of jobs cancelled while ``executor`` ran them, each told once; wait up
        to ``within`` seconds for one if there is none yet."""

    # Looking.

    @abc.abstractmethod
    async def status(self, job_id: str) -> JobStatus:
        """The job's status (UNKNOWN if there is no such job)."""

    @abc.abstractmethod
    async def job(self, job_id: str) -> JobRecord | None:
        """Everything known of one job, its stored result included."""

    @abc.abstractmethod
    async def wait_result(self, job_id: str, within: float) -> bytes | None:
        """Block up to ``within`` seconds for the job's result item; None if none came."""

    @abc.abstractmethod
    async def scheduled_jobs(self, limit: int) -> list[tuple[str, float]]:
        """Up to ``limit`` jobs waiting on the schedule of every queue (countdowns and
        retries), soonest due first, as (job id, due in seconds): what the dashboard lists."""

    @abc.abstractmethod
    async def ended_jobs(self, now: float, limit: int) -> list[str]:
        """The ids of up to ``limit`` jobs whose record is still kept after they succeeded
        (with a result kept) or were cancelled, most recently ended first."""

    @abc.abstractmethod
    async def hasten(self, job_id: str, now: float) -> bool:
        """Make a job waiting on the schedule (a countdown or a retry) due at ``now``, in
        one step, so that the next promotion queues it; False (nothing changed) if the job
        is not on the schedule."""

    @abc.abstractmethod
    async def counts(self, now: float) -> QueueCounts:
        """How many jobs are queued, executing, scheduled, dead (in all, and per queue:
        ``QueueCounts.queues``, the default queue always among them); results kept."""

    # Dead letters.

    @abc.abstractmethod
    async def dead_letters(self, limit: int | None = None) -> list[DeadLetter]:
        """The dead letters of every queue, oldest first (each names its queue)."""

    @abc.abstractmethod
    async def replay(self, letters: Sequence[DeadLetter], now: float) -> int:
        """Enqueue these dead jobs again as new (tries reset, status SENT), each on the
        queue it died in; how many."""

    @abc.abstractmethod
    async def purge(self, letters: Sequence[DeadLetter]) -> int:
        """Delete these dead jobs and everything kept for them; how many."""
