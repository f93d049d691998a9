"""Jobs enqueued while the store's reply to the enqueue is lost (a proxy drops it): what
the tests of one Redis (tests/jobs/test_job_lost_replies.py) and of a Redis Cluster
(tests/redis_cluster/test_job_lost_replies.py) check the same way.

The enqueuing app reaches the store through the proxy; the worker app (same name, same
jobs) reaches it directly, so that only the enqueue's reply is lost. ``arm(marker)``
makes the proxy drop the reply of the next command holding ``marker`` and returns the
event set when it did.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from runnel import App, chain, group
from runnel.jobs import JobResult, SyncJobResult
from runnel.jobs.model import QueueCounts
from runnel.metrics import stats
from tests.support.apps import HANG_GUARD, Running

MARKER = "lost-reply"
"""An argument of the job whose enqueue's reply is dropped: the proxy finds it in the
request."""

Arm = Callable[[bytes], threading.Event]


def declare(app: App) -> list[str]:
    """The jobs of these tests; the list each run appends its tag to."""
    runs: list[str] = []

    @app.job
    async def echo(tag: str) -> str:
        runs.append(tag)
        return tag.upper()

    return runs


async def counts(app: App) -> QueueCounts:
    return await app.job_store.counts(app.clock.now())


async def enqueue_one(enqueuer: App, arm: Arm, *, named: bool, sync: bool) -> JobResult[Any]:
    """``delay()`` (or ``delay_sync()``) of one job, with or without a ``job_id``, whose
    first reply is dropped; the handle it returned (as a JobResult)."""
    echo = enqueuer.jobs["echo"]
    job_id = "order-7" if named else None
    if sync:  # the portal's loop, its own connections: warmed up there
        await asyncio.to_thread(echo.delay_sync, "warm")
        dropped = arm(MARKER.encode())
        handle: SyncJobResult[Any] = await asyncio.to_thread(
            lambda: echo.delay_sync(MARKER, job_id=job_id)
        )
        result: JobResult[Any] = JobResult(enqueuer, handle.id, echo, handle.enqueued)
    else:
        await echo.delay("warm")  # connected, the script loaded
        dropped = arm(MARKER.encode())
        result = await echo.delay(MARKER, job_id=job_id)
    assert dropped.is_set()
    if named:
        assert result.id == "order-7"
    return result


async def check_one_job(worker: App, runs: list[str], result: JobResult[Any]) -> None:
    """The job is stored once, queued once, runs once, and its caller gets its result."""
    assert result.enqueued is True  # the retry answered as the first try would have
    assert (await counts(worker)).queued == 2  # "warm" and this one, not twice
    async with Running(worker):
        assert await result.get(timeout=HANG_GUARD) == MARKER.upper()
    assert sorted(runs) == sorted(["warm", MARKER])
    assert (await counts(worker)).totals.succeeded == 2


async def check_a_batch(enqueuer: App, worker: App, runs: list[str], arm: Arm) -> None:
    """Concurrent ``delay()`` calls share store calls; the one whose reply is lost is sent
    again whole: every caller gets its job, each stored and run once."""
    echo = enqueuer.jobs["echo"]
    await echo.delay("warm")
    dropped = arm(MARKER.encode())
    tags = [f"b{i}" for i in range(20)] + [MARKER]
    results = await asyncio.gather(*(echo.delay(tag) for tag in tags))
    assert dropped.is_set()
    assert [r.enqueued for r in results] == [True] * len(tags)
    assert (await counts(worker)).queued == len(tags) + 1
    async with Running(worker):
        for tag, result in zip(tags, results, strict=True):
            assert await result.get(timeout=HANG_GUARD) == tag.upper()
    assert sorted(runs) == sorted([*tags, "warm"])


async def check_a_workflow(
    enqueuer: App, worker: App, runs: list[str], arm: Arm, shape: str
) -> None:
    """A chain or a group whose enqueue's reply is lost: stored once (each job once),
    counted as enqueued, and its result comes."""
    echo = enqueuer.jobs["echo"]
    await echo.si("warm").delay()  # a workflow of one job: its script loaded
    counted = stats.enqueued[enqueuer.name, "echo", "default"]
    if shape == "chain":
        flow, ready, expected = chain(echo.si(MARKER), echo.si("second")), 1, "SECOND"
    else:
        flow, ready, expected = (
            group(echo.s(MARKER), echo.s("second")),
            2,
            [
                MARKER.upper(),
                "SECOND",
            ],
        )
    dropped = arm(MARKER.encode())
    handle = await flow.delay()
    assert dropped.is_set()
    assert stats.enqueued[enqueuer.name, "echo", "default"] - counted == 2  # it was stored
    assert (await counts(worker)).queued == 1 + ready
    async with Running(worker):
        assert await handle.get(timeout=HANG_GUARD) == expected
    assert sorted(runs) == sorted(["warm", MARKER, "second"])
    info = await handle.info()
    assert info is not None and len(info.members) == 2
