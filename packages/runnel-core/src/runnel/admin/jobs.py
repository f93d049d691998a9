"""What ``runnel jobs info`` and ``runnel jobs show`` show: the job queue's counts and
executors, everything kept of one job, and the jobs running now (for the dashboard)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from runnel.admin.declarations import Declarations
from runnel.jobs import codec
from runnel.jobs.model import ExecutorState, JobRecord, JobStatus, QueueCounts
from runnel.jobs.periodic import Cron, tick_id
from runnel.jobs.queues import DEFAULT_QUEUE, declared_queues
from runnel.jobs.result import current_progress


def iso(seconds: float | None) -> str | None:
    """A time as the reports give it: ISO 8601 in UTC, to the millisecond."""
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):  # beyond what a datetime can show
        return f"{seconds:.3f} s after the epoch"


async def queue_state(app: Declarations) -> tuple[QueueCounts, list[ExecutorState]]:
    """The queue's counts now, and its executors."""
    store = app.job_store
    return await store.counts(app.clock.now()), await store.executors()


@dataclass(frozen=True)
class PeriodicState:
    """A periodic job: its schedule, its last settled tick with the status of that tick's
    job (UNKNOWN once its record expired, or if the tick was skipped), and its next tick."""

    name: str
    cron: Cron
    last: float | None
    job: str | None
    status: str | None
    next: float | None
    queue: str = DEFAULT_QUEUE
    """The queue its ticks' jobs go to."""

    def report(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cron": self.cron.spec,
            "timezone": self.cron.zone_name,
            "missed": self.cron.missed,
            "queue": self.queue,
            "last_tick": iso(self.last),
            "last_job": self.job,
            "last_status": self.status,
            "next_tick": iso(self.next),
        }


async def periodic_state(app: Declarations) -> list[PeriodicState]:
    """Each periodic job's state now, by name."""
    periodic = {n: j for n, j in sorted(app.jobs.items()) if j.periodic is not None}
    if not periodic:
        return []
    store = app.job_store
    last = await store.last_ticks(list(periodic))
    now = app.clock.now()
    out = []
    for name, job in periodic.items():
        cron = job.periodic
        assert cron is not None
        tick = last.get(name)
        job_id = None if tick is None else tick_id(name, tick)
        status = None if job_id is None else str(await store.status(job_id))
        nxt = cron.after(now if tick is None else max(now, tick))
        out.append(PeriodicState(name, cron, tick, job_id, status, nxt, job.queue))
    return out


def info_report(
    app: Declarations,
    counts: QueueCounts,
    executors: list[ExecutorState],
    periodic: list[PeriodicState] | None = None,
) -> dict[str, Any]:
    """What ``runnel jobs info --json`` prints, of a state read by :func:`queue_state` (and
    :func:`periodic_state`)."""
    return {
        "app": app.name,
        "jobs": sorted(app.jobs),
        "queued": counts.queued,
        "executing": counts.executing,
        "scheduled": counts.scheduled,
        "next_due": iso(counts.next_due),
        "dead": counts.dead,
        "cancelled": counts.cancelled,
        "results": counts.results,
        "totals": {
            "succeeded": counts.totals.succeeded,
            "retried": counts.totals.retried,
            "dead": counts.totals.dead,
        },
        "queues": {
            name: {
                "queued": c.queued,
                "executing": c.executing,
                "scheduled": c.scheduled,
                "next_due": iso(c.next_due),
                "dead": c.dead,
            }
            for name, c in queue_counts(app, counts).items()
        },
        "executors": [{"id": e.id, "alive": e.alive, **e.info} for e in executors],
        "periodic": [p.report() for p in periodic or []],
    }


def queue_counts(app: Declarations, counts: QueueCounts) -> dict[str, QueueCounts]:
    """The counts of each queue: those the app declares, in the order declared (empty
    ones too), then any other the store holds (jobs of another app's code), by name."""
    empty = QueueCounts(0, 0, 0, 0, 0)
    declared = {name: counts.queues.get(name, empty) for name in declared_queues(app.jobs.values())}
    others = {name: counts.queues[name] for name in sorted(counts.queues) if name not in declared}
    return declared | others


async def jobs_report(app: Declarations) -> dict[str, Any]:
    """What ``runnel jobs info --json`` prints, read now."""
    return info_report(app, *await queue_state(app), await periodic_state(app))


WAITING = (JobStatus.SENT, JobStatus.RETRY)


def describe_job(record: JobRecord) -> dict[str, Any]:
    """What ``runnel jobs show --json`` prints of a job: its arguments and result
    decoded where they can be (a failure to decode is shown, not raised)."""
    report: dict[str, Any] = {
        "id": record.id,
        "name": record.name,
        "queue": record.queue,
        "status": str(record.status),
        "tries": record.tries,
        "retries": record.retries,
        "created": iso(record.created),
        "due": iso(record.due),
        "started": iso(record.started),
        "finished": iso(record.finished),
        "executor": record.executor,
        "workflow": record.workflow,
        "codec": record.codec,
        "args": None,
        "kwargs": None,
        "error": None,
        "progress": progress_report(record),
        # Why its last start was put off, while it waits on the schedule (limits).
        "waiting": record.waiting if record.status in WAITING and record.due else None,
    }
    try:
        serializer = codec.serializer_named(record.codec)
        args, kwargs = codec.decode_arguments(serializer, record.payload)
        report["args"], report["kwargs"] = args, kwargs
    except Exception as exc:  # user data or codec: shown, not fatal
        report["args"] = f"<cannot decode: {exc}>"
        serializer = None
    if record.error is not None:
        report["error"] = {
            "type": record.error.type,
            "message": record.error.message,
            "traceback": record.error.traceback,
        }
    if record.result is not None and serializer is not None:
        ok, value = codec.read_item(serializer, record.result)
        if ok:
            report["result"] = value
    return report


def progress_report(record: JobRecord) -> dict[str, Any] | None:
    """The progress the job's latest try reported, as ``runnel jobs show --json`` gives it
    (None if that try reported none)."""
    progress = current_progress(record)
    if progress is None:
        return None
    return {
        "fraction": progress.fraction,
        "message": progress.message,
        "at": iso(progress.at),
        "try": progress.tries,
    }


def percent(fraction: float) -> str:
    """A fraction done as a whole percentage, rounded down (100% only when all is done)."""
    return f"{math.floor(fraction * 100 + 1e-9)}%"


async def running_jobs(app: Declarations, limit: int) -> list[JobRecord]:
    """Up to ``limit`` jobs running now on live executors, each as the store keeps it."""
    store = app.job_store
    out: list[JobRecord] = []
    for executor in await store.executors():
        if not executor.alive or len(out) >= limit:
            continue
        for held in await store.abandoned(executor.id, limit - len(out)):
            record = await store.job(held.id) if held.started else None
            if record is not None and record.status is JobStatus.EXECUTING:
                out.append(record)
    return out
