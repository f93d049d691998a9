"""The job queue kept in this process's memory, with the Redis store's semantics.

One :class:`JobQueueState` holds everything of one app's job queue; each event loop that
uses it gets its own :class:`MemoryJobStore` over it (the app makes a store per loop, and
``delay_sync`` calls come from the portal thread's loop). Every change is made under one
lock, so each call is atomic as a Redis script is; a taker or result waiter blocked in one
loop is woken in that loop (``call_soon_threadsafe``) when another adds what it waits for.

Expiry (results, a finished job's record, heartbeats) goes by the monotonic clock, as
Redis's key expiry goes by the server's: the app's clock (a ``ManualClock`` in tests) only
stamps times and decides what is due, as it does with Redis.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from runnel.jobs import codec
from runnel.jobs.clock import Clock
from runnel.jobs.limits import Deferral, JobLimits
from runnel.jobs.model import (
    ENDED,
    Abandoned,
    DeadLetter,
    Delivery,
    ExecutorState,
    JobRecord,
    JobStatus,
    JobTotals,
    NewJob,
    Outcome,
    Progress,
    QueueCounts,
)
from runnel.jobs.queues import DEFAULT_QUEUE, TakePlan
from runnel.memory import job_limits
from runnel.memory import job_workflows as flows
from runnel.memory.job_browse import MemoryJobBrowsing
from runnel.memory.job_records import (
    Letter,
    StoredJob,
    StoredResult,
    Tally,
    Waiter,
    letter_line,
    ms,
    seconds,
)
from runnel.store.identity import CallIdentity, call_key
from runnel.store.jobs import JobStore

__all__ = ["JobQueueState", "MemoryJobStore"]

T = TypeVar("T")


@dataclass
class JobQueueState:
    """All state of one app's job queue: queue, schedule, deliveries, executors, results,
    dead letters and job records. Shared by every :class:`MemoryJobStore` made over it."""

    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    jobs: dict[str, StoredJob] = field(default_factory=dict)
    queues: dict[str, OrderedDict[bytes, str]] = field(
        default_factory=lambda: {DEFAULT_QUEUE: OrderedDict()}
    )
    """Per queue, the entries not delivered yet, oldest first: ticket -> job id."""
    pending: OrderedDict[bytes, tuple[str, str]] = field(default_factory=OrderedDict)
    """Entries delivered and not finished: ticket -> (executor, job id)."""
    schedule: dict[str, int] = field(default_factory=dict)
    """Job id -> due time (ms)."""
    dead: OrderedDict[bytes, Letter] = field(default_factory=OrderedDict)
    results: dict[str, StoredResult] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)
    """Results index: job id -> when its result expires by the workers' clock (ms)."""
    cancels: dict[str, int] = field(default_factory=dict)
    """Cancelled jobs: job id -> when its record expires by the canceller's clock (ms)."""
    notices: dict[str, list[str]] = field(default_factory=dict)
    """Executor -> ids of jobs cancelled while it ran them, not yet read by it."""
    registry: dict[str, dict[str, object]] = field(default_factory=dict)
    beats: dict[str, tuple[dict[str, object], float]] = field(default_factory=dict)
    """Executor -> (its description, monotonic time its heartbeat expires)."""
    ticks: dict[str, int] = field(default_factory=dict)
    """Periodic job name -> its last settled tick (ms)."""
    held: dict[str, dict[bytes, str]] = field(default_factory=dict)
    """Concurrency slots: job name -> ticket -> the executor holding it (job_limits.py)."""
    finished: Counter[str] = field(default_factory=Counter)
    """Tries finished since the queue began, by outcome kind (``QueueCounts.totals``)."""
    rates: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Rate limits: job name -> (next start's turn, last turn promised), monotonic us."""
    takers: list[Waiter] = field(default_factory=list, repr=False)
    result_waiters: dict[str, list[Waiter]] = field(default_factory=dict, repr=False)
    notice_waiters: dict[str, list[Waiter]] = field(default_factory=dict, repr=False)
    flows: flows.FlowBook = field(default_factory=flows.FlowBook)
    _tickets: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    # Helpers; each is called with the lock held.

    def ticket(self) -> bytes:
        return b"%d-0" % next(self._tickets)

    def record(self, job_id: str) -> StoredJob | None:
        job = self.jobs.get(job_id)
        if job is not None and job.expires is not None and job.expires <= time.monotonic():
            del self.jobs[job_id]
            return None
        return job

    def result(self, job_id: str) -> bytes | None:
        kept = self.results.get(job_id)
        if kept is not None and kept.expires is not None and kept.expires <= time.monotonic():
            del self.results[job_id]
            return None
        return None if kept is None else kept.item

    def alive(self, executor: str) -> bool:
        beat = self.beats.get(executor)
        if beat is not None and beat[1] <= time.monotonic():
            del self.beats[executor]
            return False
        return beat is not None

    def queue(self, name: str) -> OrderedDict[bytes, str]:
        found = self.queues.get(name)
        if found is None:
            found = self.queues[name] = OrderedDict()
        return found

    def add(self, new: NewJob, call: bytes | None = None) -> bool:
        """Store a new job, on its queue or the schedule; False if its id exists, unless
        this same ``call`` stored it (a retry: True again)."""
        found = self.record(new.id)
        if found is not None:
            return call is not None and found.call == call
        job = StoredJob(
            name=new.name,
            payload=new.payload,
            codec=new.codec,
            retries=new.retries,
            results=new.results,
            created=ms(new.created),
            queue=new.queue,
            call=call,
        )
        self.jobs[new.id] = job
        if new.due is None:
            self.push(new.id, new.queue)
        else:
            job.due = ms(new.due)
            self.schedule[new.id] = job.due
        return True

    def push(self, job_id: str, queue: str) -> None:
        """Onto the tail of its queue (the job names the entry), waking every blocked
        taker."""
        entry = self.ticket()
        self.queue(queue)[entry] = job_id
        job = self.jobs.get(job_id)
        if job is not None:
            job.entry = entry
        takers, self.takers = self.takers, []
        for waiter in takers:
            waiter.wake()

    def store_result(self, job_id: str, item: bytes, expires: float | None) -> None:
        self.results[job_id] = StoredResult(item, expires)
        for waiter in self.result_waiters.pop(job_id, []):
            waiter.wake()

    def holds(self, executor: str) -> bool:
        return any(owner == executor for owner, _ in self.pending.values())

    def queue_of(self, job_id: str) -> str:
        job = self.jobs.get(job_id)
        return DEFAULT_QUEUE if job is None else job.queue

    def take(self, executor: str, count: int, now: int, plan: TakePlan | None) -> list[Delivery]:
        out: list[Delivery] = []
        if plan is None:
            self._take(executor, DEFAULT_QUEUE, count, now, out)
            return out
        for name, quota in plan:
            self._take(executor, name, min(len(out) + quota, count), now, out)
        for name, _ in plan:
            self._take(executor, name, count, now, out)
        return out

    def _take(self, executor: str, name: str, upto: int, now: int, out: list[Delivery]) -> None:
        queue = self.queues.get(name)
        while queue and len(out) < upto:
            entry, job_id = queue.popitem(last=False)
            job = self.record(job_id)
            if job is None or job.status == JobStatus.CANCELLED:
                continue  # purged or cancelled while queued: nothing to run
            self.pending[entry] = (executor, job_id)
            job.tries += 1
            job.status = JobStatus.EXECUTING
            job.started = now
            job.executor = executor
            out.append(
                Delivery(
                    ticket=entry,
                    id=job_id,
                    name=job.name,
                    payload=job.payload,
                    codec=job.codec,
                    tries=job.tries,
                    retries=job.retries,
                    results=job.results,
                    queue=name,
                )
            )

    def cancel(self, job_id: str, at: int, ttl_ms: int) -> JobStatus:
        job = self.record(job_id)
        if job is None:
            return JobStatus.UNKNOWN
        before = job.status
        if before in ENDED:
            return before
        self.schedule.pop(job_id, None)
        if job.entry is not None:
            self.queue(job.queue).pop(job.entry, None)
            held = self.pending.pop(job.entry, None)
            self.held.get(job.name, {}).pop(job.entry, None)
            if held is not None and before == JobStatus.EXECUTING:
                executor = held[0]
                self.notices.setdefault(executor, []).append(job_id)
                for waiter in self.notice_waiters.pop(executor, []):
                    waiter.wake()
        job.status = JobStatus.CANCELLED
        job.finished = at
        job.due = job.entry = None
        job.expires = time.monotonic() + ttl_ms / 1000
        self.cancels[job_id] = at + ttl_ms
        if job.results:
            self.store_result(job_id, codec.CANCELLED, job.expires)
        flows.failed(self, job_id, at, ttl_ms, flows.CANCEL_LINE)
        return before

    def finish_one(self, o: Outcome, ttl_ms: int) -> bool:
        """Apply one outcome; False if its delivery is no longer outstanding."""
        if self.pending.pop(o.ticket, None) is None:
            return False
        if o.slot:
            self.held.get(o.slot, {}).pop(o.ticket, None)
        job = self.record(o.id)
        if job is None:  # purged while it ran (or expired): not brought back to life
            return True
        at = ms(o.at)
        self.finished[o.kind] += 1  # counted with the outcome: the rates' source
        if o.kind == "success":
            job.status = JobStatus.SUCCESS
            job.finished = at
            job.error = None
            expires = time.monotonic() + ttl_ms / 1000
            if o.result is not None:
                self.store_result(o.id, o.result, expires)
                self.kept[o.id] = at + ttl_ms
            job.expires = expires
            flows.succeeded(self, o.id, at, ttl_ms)
        elif o.kind == "retry":
            assert o.due is not None
            job.status = JobStatus.RETRY
            job.finished = at
            job.error = o.error
            job.due = ms(o.due)
            self.schedule[o.id] = job.due
        elif o.kind == "dead":
            job.status = JobStatus.DEAD
            job.finished = at
            job.error = o.error
            line = letter_line(o.error)
            self.dead[self.ticket()] = Letter(o.id, job.name, line, at, job.queue)
            if o.result is not None:
                self.store_result(o.id, o.result, None)
            flows.failed(self, o.id, at, ttl_ms, line)
        else:
            if o.uncount:
                job.tries -= 1
                job.status = JobStatus.RETRY if job.tries > 0 else JobStatus.SENT
                job.started = None
                job.executor = None
            self.push(o.id, job.queue)
        return True


class MemoryJobStore(MemoryJobBrowsing, JobStore, flows.MemoryWorkflows):
    """A :class:`JobStore` over a :class:`JobQueueState`, for one event loop."""

    state: JobQueueState

    def __init__(self, state: JobQueueState) -> None:
        super().__init__()
        self.state = state

    def __repr__(self) -> str:
        return f"<MemoryJobStore {id(self.state):#x}>"

    async def _until(
        self, read: Callable[[], T], waiters: Callable[[], list[Waiter]], within: float
    ) -> T:
        """``read()`` until it gives something, for up to ``within`` seconds: in between,
        wait among ``waiters()`` to be woken by a change. Both are called with the lock
        held, together, so nothing that arrives between them is missed."""
        deadline = time.monotonic() + max(0.0, within)
        loop = asyncio.get_running_loop()
        while True:
            with self.state.lock:
                got = read()
                left = deadline - time.monotonic()
                if got or left <= 0:
                    return got
                waiter = Waiter(loop, loop.create_future())
                waiters().append(waiter)
            try:
                async with asyncio.timeout(left):
                    await waiter.future
            except TimeoutError:
                pass

    # Enqueuing.

    async def enqueue(
        self, jobs: Sequence[NewJob], *, call: CallIdentity | None = None
    ) -> list[bool]:
        token = None if call is None else call_key(call)
        with self.state.lock:
            return [self.state.add(new, token) for new in jobs]

    async def last_ticks(self, names: Sequence[str]) -> dict[str, float | None]:
        with self.state.lock:
            return {n: seconds(self.state.ticks.get(n)) for n in names}

    async def settle_ticks(
        self, name: str, last: float | None, tick: float, jobs: Sequence[NewJob]
    ) -> tuple[bool, float | None]:
        s = self.state
        with s.lock:
            stored = s.ticks.get(name)
            if stored != (None if last is None else round(last * 1000)):
                return False, seconds(stored)
            s.ticks[name] = round(tick * 1000)
            for new in jobs:
                s.add(new)
        return True, tick

    # Running jobs.

    async def prepare(self, queues: Sequence[str] = (DEFAULT_QUEUE,)) -> None:
        with self.state.lock:
            for name in queues:
                self.state.queue(name)

    async def take(
        self,
        executor: str,
        count: int,
        block_ms: int,
        clock: Clock,
        queues: TakePlan | None = None,
    ) -> list[Delivery]:
        s = self.state
        return await self._until(
            lambda: s.take(executor, count, ms(clock.now()), queues),
            lambda: s.takers,
            block_ms / 1000,
        )

    async def finish(
        self,
        executor: str,
        outcomes: Sequence[Outcome],
        results_ttl: float,
        *,
        only_if_dead: bool = False,
    ) -> list[str]:
        s = self.state
        now = ms(max((o.at for o in outcomes), default=0.0))
        with s.lock:
            if only_if_dead and s.alive(executor):
                return [o.id for o in outcomes]
            ttl = ms(results_ttl)
            refused = [o.id for o in outcomes if not s.finish_one(o, ttl)]
            for job_id in [j for j, until in s.kept.items() if until <= now]:
                del s.kept[job_id]
        return refused

    async def admit(
        self, executor: str, delivery: Delivery, limits: JobLimits, now: float, wait: float
    ) -> Deferral | str | None:
        with self.state.lock:
            return job_limits.admit(self.state, executor, delivery, limits, now, wait)

    async def promote_due(self, now: float, limit: int) -> int:
        s = self.state
        with s.lock:
            due = sorted((at, job_id) for job_id, at in s.schedule.items() if at <= ms(now))
            due = due[:limit]
            for _, job_id in due:
                del s.schedule[job_id]
                job = s.record(job_id)
                if job is not None:
                    job.due = None
                    s.push(job_id, job.queue)
        return len(due)

    async def report_progress(self, executor: str, job_id: str, progress: Progress) -> bool:
        with self.state.lock:
            job = self.state.record(job_id)
            if job is None or job.status != JobStatus.EXECUTING:
                return False
            if (job.executor, job.tries) != (executor, progress.tries):
                return False
            # Through JSON, as the Redis store keeps it: readers see the same values.
            job.progress = codec.progress_from_json(codec.progress_json(progress))
            return True

    # Cancelling.

    async def cancel(self, job_id: str, at: float, results_ttl: float) -> JobStatus:
        s = self.state
        with s.lock:
            for gone in [j for j, until in s.cancels.items() if until <= ms(at)]:
                del s.cancels[gone]
            return s.cancel(job_id, ms(at), ms(results_ttl))

    async def cancelled(self, executor: str, within: float) -> list[str]:
        s = self.state
        return await self._until(
            lambda: s.notices.pop(executor, []),
            lambda: s.notice_waiters.setdefault(executor, []),
            within,
        )

    # Executors.

    async def beat(self, executor: str, info: Mapping[str, Any], ttl: float) -> None:
        # Through JSON, as the Redis store keeps it: readers see the same values.
        described = json.loads(json.dumps(dict(info), default=str))
        with self.state.lock:
            self.state.beats[executor] = (described, time.monotonic() + max(0.001, ttl))
            self.state.registry[executor] = described

    async def executors(self) -> list[ExecutorState]:
        s = self.state
        with s.lock:
            out: list[ExecutorState] = []
            for executor in sorted(s.registry):
                alive = s.alive(executor)
                info = s.beats[executor][0] if alive else s.registry[executor]
                out.append(ExecutorState(executor, alive=alive, info=dict(info)))
        return out

    async def abandoned(self, executor: str, limit: int) -> list[Abandoned]:
        s = self.state
        out: list[Abandoned] = []
        with s.lock:
            for entry, (owner, job_id) in s.pending.items():
                if len(out) >= limit:
                    break
                if owner != executor:
                    continue
                job = s.record(job_id)
                started = (
                    job is not None
                    and job.status == JobStatus.EXECUTING
                    and job.executor == executor
                )
                out.append(
                    Abandoned(
                        ticket=entry,
                        id=job_id,
                        name=job.name if job else "",
                        status=job.status if job else JobStatus.UNKNOWN,
                        started=started,
                        tries=job.tries if job else 0,
                        retries=job.retries if job else 0,
                        results=job.results if job else False,
                    )
                )
        return out

    async def forget(self, executor: str) -> bool:
        return self._forget(executor, leaving=False)

    async def leave(self, executor: str) -> None:
        self._forget(executor, leaving=True)

    def _forget(self, executor: str, *, leaving: bool) -> bool:
        s = self.state
        with s.lock:
            if leaving:
                s.beats.pop(executor, None)
            elif s.alive(executor):
                return False
            if s.holds(executor):
                return False
            s.notices.pop(executor, None)
            return s.registry.pop(executor, None) is not None

    # Looking.

    async def status(self, job_id: str) -> JobStatus:
        with self.state.lock:
            job = self.state.record(job_id)
            return JobStatus.UNKNOWN if job is None else job.status

    async def job(self, job_id: str) -> JobRecord | None:
        s = self.state
        with s.lock:
            job = s.record(job_id)
            result = s.result(job_id)
        return None if job is None else job.shown(job_id, result)

    async def wait_result(self, job_id: str, within: float) -> bytes | None:
        s = self.state
        return await self._until(
            lambda: s.result(job_id), lambda: s.result_waiters.setdefault(job_id, []), within
        )

    async def counts(self, now: float) -> QueueCounts:
        s = self.state
        with s.lock:
            per = {q: Tally(len(entries)) for q, entries in s.queues.items()}
            for _, job_id in s.pending.values():
                per.setdefault(s.queue_of(job_id), Tally()).executing += 1
            for job_id, due in s.schedule.items():
                per.setdefault(s.queue_of(job_id), Tally()).schedule(due)
            for letter in s.dead.values():
                per.setdefault(letter.queue, Tally()).dead += 1
            queues = {name: tally.counts() for name, tally in per.items()}
            return QueueCounts(
                queued=sum(c.queued for c in queues.values()),
                executing=len(s.pending),
                scheduled=len(s.schedule),
                dead=len(s.dead),
                results=sum(1 for until in s.kept.values() if until > ms(now)),
                next_due=min(s.schedule.values()) / 1000 if s.schedule else None,
                cancelled=sum(1 for until in s.cancels.values() if until > ms(now)),
                queues=queues,
                totals=JobTotals(s.finished["success"], s.finished["retry"], s.finished["dead"]),
            )

    # Dead letters.

    async def dead_letters(self, limit: int | None = None) -> list[DeadLetter]:
        with self.state.lock:
            letters = list(self.state.dead.items())
        if limit is not None:
            letters = letters[:limit]
        return [DeadLetter(t, d.id, d.name, d.error, d.at / 1000, d.queue) for t, d in letters]

    async def replay(self, letters: Sequence[DeadLetter], now: float) -> int:
        s = self.state
        n = 0
        with s.lock:
            for letter in letters:
                if s.dead.pop(letter.ticket, None) is None:
                    continue  # replayed or purged already
                job = s.record(letter.id)
                if job is None:
                    continue
                job.status = JobStatus.SENT
                job.tries = 0
                job.replayed = ms(now)
                job.error = job.started = job.finished = job.executor = job.due = None
                job.progress = None
                s.results.pop(letter.id, None)
                s.kept.pop(letter.id, None)
                s.push(letter.id, job.queue)
                n += 1
        return n

    async def purge(self, letters: Sequence[DeadLetter]) -> int:
        s = self.state
        n = 0
        with s.lock:
            for letter in letters:
                if s.dead.pop(letter.ticket, None) is None:
                    continue
                s.jobs.pop(letter.id, None)
                s.results.pop(letter.id, None)
                s.kept.pop(letter.id, None)
                n += 1
        return n
