"""What ``runnel jobs info`` and ``runnel jobs show`` show: the job queue's counts and
executors, and everything kept of one job."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from runnel.admin.declarations import Declarations
from runnel.jobs import codec
from runnel.jobs.model import ExecutorState, JobRecord, QueueCounts
from runnel.jobs.queues import declared_queues


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
        "results": counts.results,
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
    return info_report(app, *await queue_state(app))


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
        "codec": record.codec,
        "args": None,
        "kwargs": None,
        "error": None,
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
