"""The jobs views' JSON: lists of recent, running, retrying, scheduled and dead jobs
(filtered by job name and queue), one job in full, and per job name its rate, failure
ratio and run time. Everything is read from the job store, as ``runnel jobs`` reads it.

Bounds: a list shows at most ``LIST_SHOWN`` jobs, picked from at most ``SCANNED`` of the
store's (``more`` says when some were left out); the figures per job name are computed
from at most ``STATS_JOBS`` ended jobs.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

from runnel.admin.jobs import describe_job, iso, queue_counts, running_jobs
from runnel.app import App
from runnel.jobs.model import JobRecord, JobStatus

LIST_SHOWN = 200
SCANNED = 1000
STATS_JOBS = 1000
LISTS = ("recent", "running", "retrying", "scheduled", "dead")
ENDED = (JobStatus.SUCCESS, JobStatus.DEAD, JobStatus.CANCELLED)


async def records(app: App, ids: Sequence[str]) -> list[JobRecord]:
    """The records of these jobs that still exist, in order (read 100 at a time)."""
    found: list[JobRecord | None] = []
    for start in range(0, len(ids), 100):
        chunk = ids[start : start + 100]
        found += await asyncio.gather(*(app.job_store.job(i) for i in chunk))
    return [r for r in found if r is not None]


def runtime(r: JobRecord) -> float | None:
    """How long its last try ran, for a job that ended after it started."""
    if r.status not in ENDED or r.started is None or r.finished is None:
        return None
    return max(0.0, r.finished - r.started)


def row(r: JobRecord) -> dict[str, Any]:
    error = None if r.error is None else f"{r.error.type}: {r.error.message}".strip(": ")
    return {
        "id": r.id,
        "name": r.name,
        "queue": r.queue,
        "status": str(r.status),
        "tries": r.tries,
        "retries": r.retries,
        "created": iso(r.created),
        "due": iso(r.due),
        "started": iso(r.started),
        "finished": iso(r.finished),
        "runtime": runtime(r),
        "executor": r.executor,
        "error": error,
    }


async def _chosen(app: App, which: str) -> list[JobRecord]:
    store = app.job_store
    if which == "running":
        return await running_jobs(app, SCANNED)
    if which in ("retrying", "scheduled"):
        wanted = JobStatus.RETRY if which == "retrying" else JobStatus.SENT
        due = await store.scheduled_jobs(SCANNED)
        return [r for r in await records(app, [i for i, _ in due]) if r.status is wanted]
    if which == "dead":
        letters = (await store.dead_letters())[-SCANNED:]  # the newest
        return await records(app, [d.id for d in reversed(letters)])
    return await records(app, await store.ended_jobs(app.clock.now(), SCANNED))


async def job_list(app: App, which: str, name: str | None, queue: str | None) -> dict[str, Any]:
    """One list (``which`` of :data:`LISTS`), filtered; newest first but for the
    schedule, soonest due first."""
    chosen = [
        r
        for r in await _chosen(app, which)
        if (not name or r.name == name) and (not queue or r.queue == queue)
    ]
    counts = await app.job_store.counts(app.clock.now())
    return {
        "list": which,
        "jobs": [row(r) for r in chosen[:LIST_SHOWN]],
        "more": len(chosen) > LIST_SHOWN,
        "shown": LIST_SHOWN,
        "names": sorted(app.jobs),
        "queues": list(queue_counts(app, counts)),
    }


async def job_page(app: App, job_id: str) -> dict[str, Any] | None:
    """Everything kept of one job (``runnel jobs show --json``), its run time, and what
    can be done to it now."""
    record = await app.job_store.job(job_id)
    if record is None:
        return None
    report = describe_job(record)
    report["runtime"] = runtime(record)
    report["can_cancel"] = record.status not in ENDED
    report["can_retry"] = record.status in (JobStatus.SENT, JobStatus.RETRY) and bool(record.due)
    report["dead"] = record.status is JobStatus.DEAD
    return report


def percentile(values: list[float], pct: float) -> float | None:
    """Nearest rank: the smallest value with at least ``pct`` percent at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


async def job_stats(app: App) -> dict[str, Any]:
    """Per job name, over the window the store still holds: the last ``results_ttl``
    seconds (how long a success's record is kept), shortened to the last
    ``STATS_JOBS`` ended jobs when there were more: jobs succeeded (those keeping a
    result) and dead, per minute; the failure ratio dead / (succeeded + dead); run time
    p50 and p95 of the successes; and the cancelled ones."""
    store = app.job_store
    now = app.clock.now()
    ids = await store.ended_jobs(now, STATS_JOBS)
    ended = await records(app, ids)
    since = now - app.settings.results_ttl
    if len(ids) >= STATS_JOBS:
        since = max(since, min((r.finished or now for r in ended), default=now))
    window = max(now - since, 1e-9)
    per: dict[str, dict[str, Any]] = {n: _tally() for n in app.jobs}
    for r in ended:
        tally = per.setdefault(r.name, _tally())
        if r.status is JobStatus.SUCCESS and (r.finished or now) >= since:
            tally["succeeded"] += 1
            if (took := runtime(r)) is not None:
                tally["runtimes"].append(took)
        elif r.status is JobStatus.CANCELLED:
            tally["cancelled"] += 1
    for letter in await store.dead_letters():
        if letter.at >= since:
            per.setdefault(letter.name, _tally())["dead"] += 1
    out = []
    for name, t in sorted(per.items()):
        finished = t["succeeded"] + t["dead"]
        out.append(
            {
                "name": name,
                "succeeded": t["succeeded"],
                "dead": t["dead"],
                "cancelled": t["cancelled"],
                "per_minute": finished / window * 60,
                "failure_ratio": t["dead"] / finished if finished else None,
                "p50": percentile(t["runtimes"], 50),
                "p95": percentile(t["runtimes"], 95),
            }
        )
    return {"since": iso(since), "window": window, "bound": STATS_JOBS, "jobs": out}


def _tally() -> dict[str, Any]:
    return {"succeeded": 0, "dead": 0, "cancelled": 0, "runtimes": []}
