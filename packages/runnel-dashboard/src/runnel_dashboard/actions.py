"""What the dashboard's buttons do, by name (``POST /api/actions/{name}`` with JSON
arguments): each one a call that core's own commands make (``runnel jobs dead``,
``runnel jobs cancel``, ``runnel dead``, ``runnel processor skip/resume``), so the page
changes nothing the CLI could not.

Each returns the line the page shows; :class:`Refused` says why nothing was done."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from runnel.admin.dead_letters import (
    NotFound,
    Selection,
    check_partition,
    purge_stream_dead_letters,
    replay_stream_dead_letters,
    select_dead_jobs,
    stream_dead_letters,
)
from runnel.admin.quarantine import resume_partitions, skip_event
from runnel.app import App
from runnel.exceptions import RunnelError
from runnel.jobs.model import JobStatus
from runnel.processor import Processor
from runnel.stream import Stream
from runnel.text import plural

BY = "dashboard"
"""Who the control messages of a resume or skip come from."""
MAX_IDS = 1000
"""Ids one request may name."""


class Refused(Exception):
    """Bad arguments (400), or a state that does not allow the action (409)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


Action = Callable[[App, dict[str, Any]], Awaitable[str]]


def _ids(args: dict[str, Any], required: bool = True) -> tuple[str, ...] | None:
    ids = args.get("ids")
    if ids is None and not required:
        return None
    ok = isinstance(ids, list) and all(isinstance(i, str) for i in ids)
    if not ok or not ids or len(ids) > MAX_IDS:
        raise Refused(400, f'"ids": a list of 1 to {MAX_IDS} ids')
    return tuple(dict.fromkeys(ids))


def _text(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise Refused(400, f'"{key}": a name or id (a string)')
    return value


def _number(args: dict[str, Any], key: str, required: bool) -> int | None:
    value = args.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise Refused(400, f'"{key}": a partition number' + ("" if required else " or null"))
    return value


async def dead_job_replay(app: App, args: dict[str, Any]) -> str:
    letters = await select_dead_jobs(app, None, _ids(args) or ())
    count = await app.job_store.replay(letters, app.clock.now())
    return f"replayed {plural(count, 'dead job')}"


async def dead_job_purge(app: App, args: dict[str, Any]) -> str:
    letters = await select_dead_jobs(app, None, _ids(args) or ())
    return f"purged {plural(await app.job_store.purge(letters), 'dead job')}"


async def job_cancel(app: App, args: dict[str, Any]) -> str:
    job_id = _text(args, "id")
    before = await app.job_store.cancel(job_id, app.clock.now(), app.settings.results_ttl)
    if before is JobStatus.UNKNOWN:
        raise NotFound(f"no job with id {job_id!r} in app {app.name}")
    if before in (JobStatus.SUCCESS, JobStatus.DEAD, JobStatus.CANCELLED):
        raise Refused(409, f"job {job_id!r} has already ended ({before}): not cancelled")
    return f"cancelled job {job_id} (it was {before})"


async def job_retry(app: App, args: dict[str, Any]) -> str:
    job_id = _text(args, "id")
    if await app.job_store.hasten(job_id, app.clock.now()):
        return f"job {job_id} is due now: a worker starts it at its next look at the schedule"
    status = await app.job_store.status(job_id)
    if status is JobStatus.UNKNOWN:
        raise NotFound(f"no job with id {job_id!r} in app {app.name}")
    raise Refused(409, f"job {job_id!r} is {status}, not waiting on the schedule: not changed")


async def _selection(app: App, args: dict[str, Any]) -> Selection:
    name = _text(args, "stream")
    stream: Stream | None = app.streams.get(name)
    if stream is None:
        raise NotFound(f"app {app.name} has no stream named {name!r}")
    number = _number(args, "partition", required=False)
    check_partition(stream, number)
    ids = _ids(args, required=False)
    selection = Selection(stream, None, None, number, None, None if ids is None else frozenset(ids))
    if ids is not None:
        found = {x.id.decode() for x in await stream_dead_letters(selection)}
        missing = [i for i in ids if i not in found]
        if missing:
            where = "" if number is None else f" partition {number} of"
            raise NotFound(
                f"no dead letter {', '.join(map(repr, missing))} of{where} stream {name}"
            )
    return selection


async def stream_dead_replay(app: App, args: dict[str, Any]) -> str:
    selection = await _selection(app, args)
    count = await replay_stream_dead_letters(selection)
    return f"replayed {plural(count, 'dead letter')} of {selection.stream.name}"


async def stream_dead_purge(app: App, args: dict[str, Any]) -> str:
    selection = await _selection(app, args)
    count = await purge_stream_dead_letters(selection, await stream_dead_letters(selection))
    return f"purged {plural(count, 'dead letter')} of {selection.stream.name}"


def _processor(app: App, args: dict[str, Any]) -> tuple[Processor, int]:
    name, stream = _text(args, "processor"), _text(args, "stream")
    found = [p for p in app.processors.values() if p.name == name and p.stream.name == stream]
    if not found:
        raise NotFound(f"app {app.name} has no processor {name!r} of stream {stream!r}")
    proc = found[0]
    number = _number(args, "partition", required=True)
    assert number is not None
    check_partition(proc.stream, number)
    return proc, number


async def partition_skip(app: App, args: dict[str, Any]) -> str:
    proc, number = _processor(app, args)
    xid = args.get("id")
    if xid is not None and not isinstance(xid, str):
        raise Refused(400, '"id": the stream id of the event to skip, or absent')
    skipped = await skip_event(proc, number, xid, BY)
    return f"skipped {skipped} on partition {number} of {proc.name}; the partition resumes"


async def partition_resume(app: App, args: dict[str, Any]) -> str:
    proc, number = _processor(app, args)
    if not await resume_partitions(proc, number, BY):
        raise Refused(409, f"partition {number} of {proc.name} is not quarantined")
    return f"resumed partition {number} of {proc.name}"


ACTIONS: dict[str, Action] = {
    "dead-job-replay": dead_job_replay,
    "dead-job-purge": dead_job_purge,
    "job-cancel": job_cancel,
    "job-retry": job_retry,
    "stream-dead-replay": stream_dead_replay,
    "stream-dead-purge": stream_dead_purge,
    "partition-skip": partition_skip,
    "partition-resume": partition_resume,
}
__all__ = ["ACTIONS", "NotFound", "Refused", "RunnelError"]
