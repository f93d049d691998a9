"""One look at an app, gathered through core's read models (:mod:`runnel.admin`: the same
data as ``runnel status --json`` and ``runnel jobs info --json``), as a JSON-ready dict."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from runnel.admin.dead_letters import oldest_dead_jobs
from runnel.admin.jobs import jobs_report, progress_report, running_jobs
from runnel.admin.status import (
    schedule_report,
    status_report,
    stream_appended,
    stream_length,
)
from runnel.admin.tables import tables_report
from runnel.admin.workflows import recent_workflows, tally
from runnel.app import App
from runnel.urls import redact

DEAD_SHOWN = 200
"""The page lists at most this many dead letters (the oldest); the count says how many."""
RUNNING_SHOWN = 50
"""The page lists at most this many running jobs, with their progress."""
WORKFLOWS_SHOWN = 20
"""The page lists at most this many workflows (the most recent), each with at most
``MEMBERS_SHOWN`` of its jobs."""
MEMBERS_SHOWN = 50


def hide_password(url: str) -> str:
    """The URL with its passwords replaced (the user's and a sentinel's), so that it can
    be shown in the page."""
    return redact(url)


def iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


async def snapshot(app: App) -> dict[str, Any]:
    """Processors, partitions, the leader; the tables (keys per partition); the job queue,
    the jobs running (with their progress), its dead letters and the app's schedule of
    timers and crontabs. ``read_at`` is when the counts the rates come from were read
    (each stream's ``appended``, the queue's ``totals``): the middle of those reads, right
    after the backlog's."""
    status = await status_report(app)
    started = time.time()
    for proc in status["processors"]:
        proc["appended"] = await stream_appended(app, proc["name"])
    queue = await jobs_report(app) if app.jobs else None
    read_at = (started + time.time()) / 2
    for proc in status["processors"]:
        proc["length"] = await stream_length(app, proc["name"])
    dead = []
    if queue is not None and queue["dead"]:
        letters = await oldest_dead_jobs(app, DEAD_SHOWN)
        dead = [{"id": d.id, "name": d.name, "error": d.error, "died": iso(d.at)} for d in letters]
    running = []
    if queue is not None and queue["executing"]:
        for r in await running_jobs(app, RUNNING_SHOWN):
            running.append(
                {
                    "id": r.id,
                    "name": r.name,
                    "executor": r.executor,
                    "started": iso(r.started),
                    "tries": r.tries,
                    "progress": progress_report(r),
                }
            )
    workflows = []
    for w in await recent_workflows(app, WORKFLOWS_SHOWN) if app.jobs else []:
        workflows.append(
            {
                "id": w.id,
                "shape": w.shape,
                "status": str(w.status),
                "created": iso(w.created),
                "finished": iso(w.finished),
                "jobs": len(w.members),
                "tally": tally(w),
                "failed": w.failed,
                "error": w.error,
                "members": [
                    {"id": m.id, "name": m.name, "status": str(m.status)}
                    for m in w.members[:MEMBERS_SHOWN]
                ],
            }
        )
    return {
        "app": app.name,
        "read_at": read_at,
        "url": hide_password(app.settings.redis_url),
        "leader": status["leader"],
        "processors": status["processors"],
        "jobs": queue,
        "running": running,
        "dead": dead,
        "workflows": workflows,
        "schedule": schedule_report(app),
        "tables": await tables_report(app),
    }
