"""Browsing the memory job queue (the dashboard's lists) and making a scheduled job due
now: a mixin of :class:`~runnel.memory.jobs.MemoryJobStore`, so that jobs.py stays the
size it is."""

from __future__ import annotations

import threading
from typing import Protocol

from runnel.memory.job_records import StoredJob, ms


class BrowsedState(Protocol):
    """What browsing reads of :class:`~runnel.memory.jobs.JobQueueState` (a Protocol, so
    that this module does not import jobs.py, which imports it)."""

    lock: threading.Lock
    schedule: dict[str, int]
    kept: dict[str, int]
    cancels: dict[str, int]

    def record(self, job_id: str) -> StoredJob | None: ...


class MemoryJobBrowsing:
    state: BrowsedState

    async def scheduled_jobs(self, limit: int) -> list[tuple[str, float]]:
        with self.state.lock:
            soonest = sorted((at, job_id) for job_id, at in self.state.schedule.items())
        return [(job_id, at / 1000) for at, job_id in soonest[: max(0, limit)]]

    async def ended_jobs(self, now: float, limit: int) -> list[str]:
        s = self.state
        with s.lock:
            kept = [(until, job_id) for job_id, until in s.kept.items() if until > ms(now)]
            kept += [(until, job_id) for job_id, until in s.cancels.items() if until > ms(now)]
        kept.sort(reverse=True)
        return [job_id for _, job_id in kept[: max(0, limit)]]

    async def hasten(self, job_id: str, now: float) -> bool:
        s = self.state
        with s.lock:
            job = s.record(job_id)
            if job_id not in s.schedule or job is None:
                return False
            s.schedule[job_id] = job.due = ms(now)
            return True
