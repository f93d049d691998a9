"""Admitting jobs declared with limits in the in-memory job queue: what
``runnel_redis/lua/job_admit.lua`` does in Redis (see :meth:`JobStore.admit`).

The rate is a GCRA (a token bucket kept as the next start's turn per job name) on the
monotonic clock, as the Redis store's runs on the server's clock, with its line: the last
turn promised to a job put off, so that the jobs put off come back one turn apart. The
concurrency slots are the deliveries admitted, each with the executor holding it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Protocol

from runnel.jobs.limits import GONE, Deferral, JobLimits, LimitKind
from runnel.jobs.model import Delivery, JobStatus
from runnel.memory.job_records import StoredJob, ms


class JobQueueState(Protocol):
    """What this module uses of :class:`runnel.memory.jobs.JobQueueState` (named here,
    not imported: that module imports this one)."""

    jobs: dict[str, StoredJob]
    pending: OrderedDict[bytes, tuple[str, str]]
    schedule: dict[str, int]
    held: dict[str, dict[bytes, str]]
    rates: dict[str, tuple[int, int]]

    def record(self, job_id: str) -> StoredJob | None: ...

    def alive(self, executor: str) -> bool: ...


def admit(
    s: JobQueueState, executor: str, d: Delivery, limits: JobLimits, now: float, wait: float
) -> Deferral | str | None:
    """Admit or defer the delivery (called with the state's lock held)."""
    owner = s.pending.get(d.ticket)
    if owner is None or owner[0] != executor:
        return GONE
    job = s.record(d.id)
    if job is None:
        return None  # purged while taken: its outcome will not bring it back
    held = None
    if limits.concurrency is not None:
        held = s.held.setdefault(d.name, {})
        for ticket, holder in list(held.items()):
            if holder != executor and not s.alive(holder):
                del held[ticket]  # its executor stopped beating: the slot is free again
        if len(held) >= limits.concurrency:
            return _defer(s, d, "concurrency", now + wait)
    rate = limits.rate
    if rate is not None:
        clock = time.monotonic_ns() // 1000
        turn, line = s.rates.get(d.name, (clock, 0))
        turn = max(turn, clock)
        allowed = turn - rate.burst_us
        if allowed > clock:  # its turn is promised after the others put off before it
            line = max(line + rate.interval_us, allowed)
            s.rates[d.name] = (turn, line)
            return _defer(s, d, "rate", now + (line - clock) / 1_000_000)
        s.rates[d.name] = (turn + rate.interval_us, line)
    if held is not None:
        held[d.ticket] = executor
    job.waiting = None
    return None


def _defer(s: JobQueueState, d: Delivery, limit: LimitKind, due: float) -> Deferral:
    """End the delivery, take its try back, and put the job on the schedule."""
    del s.pending[d.ticket]
    job = s.jobs[d.id]
    job.tries -= 1
    job.status = JobStatus.RETRY if job.tries > 0 else JobStatus.SENT
    job.started = job.executor = job.entry = None
    job.due = ms(due)
    job.waiting = limit
    s.schedule[d.id] = job.due
    return Deferral(limit, due)
