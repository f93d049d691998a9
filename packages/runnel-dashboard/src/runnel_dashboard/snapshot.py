"""One look at an app, gathered through core's report functions (the same data as
``runnel status --json`` and ``runnel jobs info --json``), as a JSON-ready dict."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from runnel.app import App
from runnel.cli.jobs import jobs_report
from runnel.cli.status import status_report
from runnel.exceptions import Misconfigured
from runnel.store.backend import admin_of

DEAD_SHOWN = 200
"""The page lists at most this many dead letters (the oldest); the count says how many."""


def hide_password(url: str) -> str:
    """The URL with any password replaced, so that it can be shown in the page."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


async def snapshot(app: App) -> dict[str, Any]:
    """Processors, partitions, the leader; the job queue, its dead letters and the app's
    schedule of timers and crontabs."""
    status = await status_report(app)
    for proc in status["processors"]:
        proc["length"] = await _length(app, proc["name"])
    queue = await jobs_report(app) if app.jobs else None
    dead = []
    if queue is not None and queue["dead"]:
        letters = await app.job_store.dead_letters(DEAD_SHOWN)
        dead = [{"id": d.id, "name": d.name, "error": d.error, "died": iso(d.at)} for d in letters]
    return {
        "app": app.name,
        "url": hide_password(app.settings.redis_url),
        "leader": status["leader"],
        "processors": status["processors"],
        "jobs": queue,
        "dead": dead,
        "schedule": [
            {
                "name": task.name,
                "kind": task.kind,
                "every": task.interval,
                "crontab": task.spec,
                "on_leader": task.on_leader,
            }
            for task in app.background
            if task.kind != "task"
        ],
    }


async def _length(app: App, processor: str) -> int | None:
    """How many entries the processor's stream holds over all partitions (None where the
    store cannot tell)."""
    keys = [p.id for p in app.processors[processor].stream.partitions]
    try:
        return sum((await admin_of(app.store).lengths(keys)).values())
    except Misconfigured:
        return None
