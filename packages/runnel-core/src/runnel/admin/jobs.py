"""What ``runnel jobs info`` and ``runnel jobs show`` show: the job queue's counts and
executors, everything kept of one job, and the jobs running now (for the dashboard)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from runnel.admin.declarations import Declarations
from runnel.jobs import codec
from runnel.jobs.model import ExecutorState, JobRecord, JobStatus, QueueCounts
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


def info_report(
    app: Declarations, counts: QueueCounts, executors: list[ExecutorState]
) -> dict[str, Any]:
    """What ``runnel jobs info --json`` prints, of a state read by :func:`queue_state`."""
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
        "executors": [{"id": e.id, "alive": e.alive, **e.info} for e in executors],
    }


async def jobs_report(app: Declarations) -> dict[str, Any]:
    """What ``runnel jobs info --json`` prints, read now."""
    return info_report(app, *await queue_state(app))


def describe_job(record: JobRecord) -> dict[str, Any]:
    """What ``runnel jobs show --json`` prints of a job: its arguments and result
    decoded where they can be (a failure to decode is shown, not raised)."""
    report: dict[str, Any] = {
        "id": record.id,
        "name": record.name,
        "status": str(record.status),
        "tries": record.tries,
        "retries": record.retries,
        "created": iso(record.created),
        "due": iso(record.due),
        "started": iso(record.started),
        "finished": iso(record.finished),
        "executor": record.executor,
        "codec": record.codec,
        "args": None,
        "kwargs": None,
        "error": None,
        "progress": progress_report(record),
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
