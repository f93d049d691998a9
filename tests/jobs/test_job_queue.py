"""The job queue in one process: statuses, results, retries with backoff, dead letters,
sync and async callers, concurrency, scheduling, graceful stops and recovery, all against
the real redis-server and a real :class:`Worker` in the test's loop.

Time-dependent behaviour (countdowns, etas, backoff) runs on a ``ManualClock``; the only
real waits are hang guards, Redis TTLs (results, heartbeats) and "nothing happens over a
few scheduler intervals" checks.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, TypeVar

import pytest
import redis

from runnel import App, Record
from runnel.jobs import (
    ErrorInfo,
    InvalidArguments,
    JobFailed,
    JobNotFound,
    JobRecord,
    JobResult,
    JobStatus,
    ManualClock,
    ResultsDisabled,
    SyncJobResult,
    Timeout,
    current_job,
)
from runnel.jobs.model import JobTotals, Outcome, QueueCounts
from tests.support.apps import HANG_GUARD, Running, eventually, make_app

T = TypeVar("T")

T0 = 1_700_000_000.0
"""Where every ManualClock starts (a whole second, so due times in ms are exact)."""

TICK = 0.05
"""The scheduler interval of these tests' apps."""

QUIET = 8 * TICK
"""Several scheduler intervals: anything due would have been promoted and taken by then."""

PAST_BACKOFF = 60.0
"""Clock seconds past any early retry's backoff with the default base (0.5 s: a few
seconds), yet well within the default results_ttl, which counts() judges by the clock."""

JOBS_FAST: dict[str, Any] = {
    "default_grace_period": 1,
    "job_heartbeat_timeout": 1,
    "job_schedule_interval": TICK,
}

GROUP = "workers"


class Point(Record):
    x: int
    when: datetime


# Helpers.


NewApp = Callable[..., App]
"""``new_app(**settings)``: an App of this test's name on the private server."""


@pytest.fixture
async def new_app(redis_url: str, app_name: str) -> AsyncIterator[NewApp]:
    """Apps with short job settings; their connections in the test's loop are closed after."""
    apps: list[App] = []

    def make(**settings: Any) -> App:
        app = make_app(app_name, redis_url, **{**JOBS_FAST, **settings})
        apps.append(app)
        return app

    yield make
    for app in apps:
        await app.aclose()


def manual(app: App, start: float = T0) -> ManualClock:
    """Put a ManualClock on the app (before its Worker is made: the executor keeps it)."""
    clock = ManualClock(start)
    app.clock = clock
    return clock


def key(app: App, suffix: str) -> str:
    return f"__jobs:{app.name}.{suffix}"


def job_hash(client: redis.Redis, app: App, job_id: str) -> dict[str, bytes]:
    return {k.decode(): v for k, v in client.hgetall(key(app, f"job.{job_id}")).items()}


def due_score(client: redis.Redis, app: App, job_id: str) -> float | None:
    """The job's due time on the schedule, in seconds (None if not scheduled)."""
    score = client.zscore(key(app, "schedule"), job_id)
    return None if score is None else score / 1000


def queue_state(client: redis.Redis, app: App) -> tuple[int, int]:
    """(XLEN, XPENDING count) of the queue stream (0 pending while there is no group)."""
    length = client.xlen(key(app, "queue"))
    try:
        pending = client.xpending(key(app, "queue"), GROUP)["pending"]
    except redis.ResponseError:
        pending = 0
    return length, pending


def job_keys(client: redis.Redis, app: App) -> list[bytes]:
    return sorted(client.keys(key(app, "job.*")))


async def until(check: Callable[[], Awaitable[T]], what: str) -> T:
    """Await ``check()`` until truthy (the guard only bounds a hung test)."""
    try:
        async with asyncio.timeout(HANG_GUARD):
            while True:
                value = await check()
                if value:
                    return value
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"never happened: {what}") from None


async def reach(result: JobResult[Any], status: JobStatus, tries: int | None = None) -> JobRecord:
    """Wait until ``await result.status()`` is ``status`` (with ``tries`` counted, if given);
    the job's record then."""

    async def check() -> JobRecord | None:
        if await result.status() is not status:
            return None
        info = await result.info()
        if info is None or info.status is not status:
            return None
        if tries is not None and info.tries != tries:
            return None
        return info

    return await until(check, f"job {result.id} {status} (tries {tries})")


async def ghost_takes(app: App, clock: ManualClock, beat_ttl: float = 0.5) -> list[Any]:
    """A made-up executor "ghost" announces itself for ``beat_ttl`` seconds and takes one
    queued job (marked EXECUTING there, try counted), then never beats again."""
    store = app.job_store
    await store.prepare()
    await store.beat("ghost", {"host": "nowhere", "pid": 1}, beat_ttl)
    return await store.take("ghost", 1, 0, clock)


@pytest.fixture
def far_from_utc() -> Iterator[None]:
    """The process's local time zone far from UTC, so a naive datetime read as local time
    instead of UTC would land hours away."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = saved
        time.tzset()


# Statuses.


async def test_status_goes_sent_executing_retry_executing_success(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """SENT after delay(); EXECUTING while it runs; RETRY after a failure with tries left;
    EXECUTING again once due; SUCCESS. ``tries`` counts the tries started at each step."""
    app = new_app()
    clock = manual(app)
    gate = asyncio.Event()
    state = {"fail": True}

    @app.job(retries=2)
    async def step() -> str:
        await gate.wait()
        gate.clear()
        if state["fail"]:
            raise RuntimeError("not yet")
        return "ok"

    r = await step.delay()
    assert await r.status() is JobStatus.SENT
    info = await r.info()
    assert info is not None and info.tries == 0 and info.name == "step" and info.retries == 2
    assert (info.created, info.started, info.finished) == (T0, None, None)
    assert job_hash(redis_client, app, r.id)["status"] == b"SENT"

    async with Running(app) as running:
        assert running.worker.job_executor is not None
        info = await reach(r, JobStatus.EXECUTING)
        assert (info.tries, info.started) == (1, T0)
        assert info.executor == running.worker.job_executor.id
        h = job_hash(redis_client, app, r.id)
        assert (h["status"], h["tries"]) == (b"EXECUTING", b"1")

        gate.set()
        info = await reach(r, JobStatus.RETRY)
        assert (info.tries, info.finished) == (1, T0)
        assert info.error is not None
        assert (info.error.type, info.error.message) == ("RuntimeError", "not yet")
        assert "not yet" in info.error.traceback
        assert job_hash(redis_client, app, r.id)["status"] == b"RETRY"

        clock.advance(PAST_BACKOFF)
        info = await reach(r, JobStatus.EXECUTING)
        assert (info.tries, info.started) == (2, T0 + PAST_BACKOFF)
        assert job_hash(redis_client, app, r.id)["status"] == b"EXECUTING"

        state["fail"] = False
        gate.set()
        info = await reach(r, JobStatus.SUCCESS)
        assert info.tries == 2
        assert info.error is None
        assert job_hash(redis_client, app, r.id)["status"] == b"SUCCESS"
        assert await r.get(timeout=HANG_GUARD) == "ok"


async def test_status_dead_after_the_last_try(new_app: NewApp, redis_client: redis.Redis) -> None:
    """A job that fails every try: RETRY after the first, DEAD after the last (retries=1:
    two tries), and get() raises JobFailed with the exception's type and message."""
    app = new_app()
    clock = manual(app)

    @app.job(retries=1)
    async def doomed(n: int) -> None:
        raise ValueError(f"bad input {n}")

    r = await doomed.delay(7)
    async with Running(app):
        info = await reach(r, JobStatus.RETRY)
        assert info.tries == 1
        clock.advance(PAST_BACKOFF)
        info = await reach(r, JobStatus.DEAD)
        assert info.tries == 2
        assert info.error is not None and info.error.type == "ValueError"
        with pytest.raises(JobFailed) as failed:
            await r.get(timeout=HANG_GUARD)
    assert (failed.value.type, failed.value.message) == ("ValueError", "bad input 7")
    assert failed.value.job_id == r.id
    assert job_hash(redis_client, app, r.id)["status"] == b"DEAD"


async def test_status_unknown_for_an_id_never_enqueued(new_app: NewApp) -> None:
    """An id nobody enqueued: UNKNOWN, no record, and get() raises JobNotFound."""
    app = new_app()

    @app.job
    async def noop() -> None:
        pass

    r = noop.result("never-enqueued")
    assert await r.status() is JobStatus.UNKNOWN
    assert await r.info() is None
    with pytest.raises(JobNotFound):
        await r.get(timeout=1)
    assert await app.job_result("never-enqueued").status() is JobStatus.UNKNOWN


# Results.


async def test_get_returns_values_typed_by_the_return_annotation(new_app: NewApp) -> None:
    """get() turns the stored value back into the annotated return type (datetime, a
    Record); an untyped handle (app.job_result) gives the plain decoded value."""
    app = new_app()
    when = datetime(2024, 2, 29, 12, 30, 15, 250000, tzinfo=UTC)

    @app.job
    async def stamp(seconds: float) -> datetime:
        return datetime.fromtimestamp(seconds, UTC)

    @app.job
    def make_point(x: int) -> Point:
        return Point(x=x, when=when)

    @app.job
    async def plain() -> list[int]:
        return [1, 2, 3]

    async with Running(app):
        r1 = await stamp.delay(when.timestamp())
        r2 = await make_point.delay(5)
        r3 = await plain.delay()
        value = await r1.get(timeout=HANG_GUARD)
        assert isinstance(value, datetime) and value == when
        point = await r2.get(timeout=HANG_GUARD)
        assert isinstance(point, Point) and point == Point(x=5, when=when)
        assert await r3.get(timeout=HANG_GUARD) == [1, 2, 3]
        untyped = await app.job_result(r2.id).get(timeout=HANG_GUARD)
        assert isinstance(untyped, dict) and untyped["x"] == 5


async def test_results_ttl_expires_the_result_and_record(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """With a short results_ttl a finished job's record and result expire (Redis expiry):
    status UNKNOWN, get() raises JobNotFound."""
    app = new_app(results_ttl=1.5)

    @app.job
    async def answer() -> int:
        return 42

    async with Running(app):
        r = await answer.delay()
        assert await r.get(timeout=HANG_GUARD) == 42
        assert await r.status() is JobStatus.SUCCESS
        assert redis_client.exists(key(app, f"result.{r.id}")) == 1
        assert redis_client.pttl(key(app, f"job.{r.id}")) > 0

        async def gone() -> bool:
            return await r.status() is JobStatus.UNKNOWN

        await until(gone, "the finished job expired")
        assert redis_client.exists(key(app, f"job.{r.id}"), key(app, f"result.{r.id}")) == 0
        assert await r.info() is None
        with pytest.raises(JobNotFound):
            await r.get(timeout=1)


async def test_results_disabled_keeps_no_result(new_app: NewApp, redis_client: redis.Redis) -> None:
    """results_enabled=False: the job still reaches SUCCESS but nothing is stored under
    result.*, and get() raises ResultsDisabled instead of waiting."""
    app = new_app(results_enabled=False)

    @app.job
    async def answer() -> int:
        return 42

    async with Running(app):
        r = await answer.delay()
        info = await reach(r, JobStatus.SUCCESS)
        assert not info.results and info.result is None
        assert redis_client.keys(key(app, "result.*")) == []
        assert redis_client.zcard(key(app, "results")) == 0
        with pytest.raises(ResultsDisabled):
            await r.get(timeout=1)


async def test_get_with_a_timeout_both_ways(new_app: NewApp) -> None:
    """get(timeout) raises Timeout (a TimeoutError) while the job is still running, returns
    once it finishes within the timeout, and timeout=0 on a finished job returns at once."""
    app = new_app()
    gate = asyncio.Event()

    @app.job
    async def waits() -> str:
        await gate.wait()
        return "done"

    async with Running(app):
        r = await waits.delay()
        await reach(r, JobStatus.EXECUTING)
        with pytest.raises(Timeout) as timed_out:
            await r.get(timeout=0.2)
        assert isinstance(timed_out.value, TimeoutError)
        with pytest.raises(Timeout):
            await r.get(timeout=0)
        assert await r.status() is JobStatus.EXECUTING

        waiter = asyncio.create_task(r.get(timeout=HANG_GUARD))
        await asyncio.sleep(0.1)  # let it block on the result first
        assert not waiter.done()
        gate.set()
        assert await waiter == "done"
        assert await r.get(timeout=0) == "done"


# Retries and their delays.


async def test_retry_waits_its_backoff_on_the_schedule(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """After failure n the job's schedule score is the failure time + a delay in
    [0.5, 1.5) x base*2**n; it does not run before the clock passes that score, and runs
    once it does."""
    base = 10.0
    app = new_app(job_backoff_base=base)
    clock = manual(app)
    runs: list[float] = []

    @app.job(retries=2)
    async def flaky() -> str:
        runs.append(clock.now())
        if len(runs) < 3:
            raise RuntimeError(f"fail {len(runs)}")
        return "finally"

    r = await flaky.delay()
    async with Running(app):
        for tries in (1, 2):
            failed_at = clock.now()
            info = await reach(r, JobStatus.RETRY, tries=tries)
            assert runs[-1] == failed_at and len(runs) == tries
            due = due_score(redis_client, app, r.id)
            assert due is not None and info.due == due
            nominal = base * 2**tries
            assert failed_at + 0.5 * nominal - 0.001 <= due <= failed_at + 1.5 * nominal

            clock.set(due - 0.01)  # just short of due
            await asyncio.sleep(QUIET)
            assert len(runs) == tries
            assert await r.status() is JobStatus.RETRY
            assert due_score(redis_client, app, r.id) == due

            clock.set(due + 0.01)
            await eventually(lambda n=tries: len(runs) > n, f"try {tries + 1} ran")
        assert await r.get(timeout=HANG_GUARD) == "finally"
        info = await reach(r, JobStatus.SUCCESS)
        assert info.tries == 3 and len(runs) == 3
        assert due_score(redis_client, app, r.id) is None


async def test_retry_backoff_is_capped(new_app: NewApp, redis_client: redis.Redis) -> None:
    """With job_backoff_cap below base*2**n, every retry waits between cap/2 and cap."""
    cap = 15.0
    app = new_app(job_backoff_base=10, job_backoff_cap=cap)
    clock = manual(app)

    @app.job(retries=3)
    async def always_fails() -> None:
        raise RuntimeError("no")

    r = await always_fails.delay()
    async with Running(app):
        for tries in (1, 2, 3):
            failed_at = clock.now()
            await reach(r, JobStatus.RETRY, tries=tries)
            due = due_score(redis_client, app, r.id)
            assert due is not None
            assert failed_at + 0.5 * cap - 0.001 <= due <= failed_at + cap
            clock.set(due + 0.01)
        info = await reach(r, JobStatus.DEAD)
        assert info.tries == 4


# Dead letters.


async def test_dead_letters_replay_and_purge(new_app: NewApp, redis_client: redis.Redis) -> None:
    """A DEAD job is in the dead-letter stream ({id, name, error}) and dead_letters();
    replay() re-runs it from tries 0 (SENT, then SUCCESS now that it succeeds); purge()
    deletes the letter, the job's record and its result."""
    app = new_app()
    broken = {"on": True}

    @app.job(retries=0)
    async def fragile(n: int) -> int:
        if broken["on"]:
            raise RuntimeError(f"broken {n}")
        return n * 10

    async with Running(app):
        r1 = await fragile.delay(1)
        r2 = await fragile.delay(2)
        await reach(r1, JobStatus.DEAD, tries=1)
        await reach(r2, JobStatus.DEAD, tries=1)
        with pytest.raises(JobFailed) as failed:
            await r1.get(timeout=HANG_GUARD)
        assert (failed.value.type, failed.value.message) == ("RuntimeError", "broken 1")

    entries = redis_client.xrange(key(app, "dead"))
    finished = [(await r.info()).finished for r in (r1, r2)]  # type: ignore[union-attr]
    assert [fields for _, fields in entries] == [
        {
            b"id": r.id.encode(),
            b"name": b"fragile",
            b"error": f"RuntimeError: broken {n}".encode(),
            b"at": str(round(at * 1000)).encode(),  # when it died, by the app's clock
        }
        for n, r, at in ((1, r1, finished[0]), (2, r2, finished[1]))
    ]
    store = app.job_store
    letters = await store.dead_letters()
    assert [(x.id, x.name, x.error, x.at) for x in letters] == [
        (r1.id, "fragile", "RuntimeError: broken 1", finished[0]),
        (r2.id, "fragile", "RuntimeError: broken 2", finished[1]),
    ]
    assert (await store.counts(app.clock.now())).dead == 2

    broken["on"] = False
    assert await store.replay([letters[0]], app.clock.now()) == 1
    assert await r1.status() is JobStatus.SENT
    info = await r1.info()
    assert info is not None
    assert (info.tries, info.error, info.result) == (0, None, None)
    assert [x.id for x in await store.dead_letters()] == [r2.id]
    assert queue_state(redis_client, app) == (1, 0)
    assert await store.replay([letters[0]], app.clock.now()) == 0  # a letter replays once

    assert await store.purge([letters[1]]) == 1
    assert await r2.status() is JobStatus.UNKNOWN
    assert redis_client.exists(key(app, f"job.{r2.id}"), key(app, f"result.{r2.id}")) == 0
    assert redis_client.xlen(key(app, "dead")) == 0
    assert await store.purge([letters[1]]) == 0
    with pytest.raises(JobNotFound):
        await r2.get(timeout=1)

    async with Running(app):
        assert await r1.get(timeout=HANG_GUARD) == 10
        info = await reach(r1, JobStatus.SUCCESS)
        assert info.tries == 1
    assert queue_state(redis_client, app) == (0, 0)


# Sync and async callers.


async def test_delay_sync_and_sync_results_from_threads(new_app: NewApp) -> None:
    """delay_sync() from plain threads (no loop there) enqueues while the worker runs in the
    test's loop; SyncJobResult.get()/status() block for the answer; result.sync() gives the
    blocking handle of an async-enqueued job."""
    app = new_app()

    @app.job
    async def double(x: int) -> int:
        return 2 * x

    try:
        async with Running(app):
            s = await asyncio.to_thread(double.delay_sync, 21)
            assert isinstance(s, SyncJobResult)
            assert await asyncio.to_thread(s.get, HANG_GUARD) == 42
            assert await asyncio.to_thread(s.status) is JobStatus.SUCCESS
            info = await asyncio.to_thread(s.info)
            assert info is not None and info.tries == 1

            got: dict[str, Any] = {}

            def in_a_thread() -> None:
                handle = double.delay_sync(x=5)
                got["id"] = handle.id
                got["value"] = handle.get(timeout=HANG_GUARD)
                got["status"] = handle.status()

            thread = threading.Thread(target=in_a_thread)
            thread.start()
            await eventually(lambda: not thread.is_alive(), "the thread finished")
            assert (got["value"], got["status"]) == (10, JobStatus.SUCCESS)
            assert await double.result(got["id"]).get(timeout=HANG_GUARD) == 10

            r = await double.delay(50)
            blocking = r.sync()
            assert isinstance(blocking, SyncJobResult) and blocking.id == r.id
            assert await asyncio.to_thread(blocking.get, HANG_GUARD) == 100
            assert await asyncio.to_thread(blocking.status) is JobStatus.SUCCESS
    finally:
        app.portal.call(app.aclose)


async def test_delay_sync_from_the_loop_thread(new_app: NewApp) -> None:
    """delay_sync() called on a thread whose own loop is running (as the portal promises)
    stores the job; it only blocks that loop while storing."""
    app = new_app()

    @app.job
    async def double(x: int) -> int:
        return 2 * x

    try:
        async with Running(app):
            direct = double.delay_sync(7)
            assert await double.result(direct.id).get(timeout=HANG_GUARD) == 14
    finally:
        app.portal.call(app.aclose)


async def test_sync_jobs_run_in_threads_while_async_jobs_go_on(new_app: NewApp) -> None:
    """A plain-def job blocked on a threading.Event runs in a worker thread: async jobs
    enqueued after it complete while it is still blocked."""
    app = new_app()
    release = threading.Event()
    threads: list[int] = []

    @app.job
    def blocking() -> str:
        threads.append(threading.get_ident())
        if not release.wait(HANG_GUARD):
            raise TimeoutError("never released")
        return "unblocked"

    @app.job
    async def quick(i: int) -> int:
        return i

    try:
        async with Running(app):
            b = await blocking.delay()
            await reach(b, JobStatus.EXECUTING)
            await eventually(lambda: threads, "the sync job started")
            quicks = [await quick.delay(i) for i in range(5)]
            values = [await q.get(timeout=HANG_GUARD) for q in quicks]
            assert values == list(range(5))
            assert not release.is_set()
            assert await b.status() is JobStatus.EXECUTING
            release.set()
            assert await b.get(timeout=HANG_GUARD) == "unblocked"
    finally:
        release.set()
    assert threads and threads[0] != threading.get_ident()


async def test_concurrency_bounds_jobs_running_at_once(new_app: NewApp) -> None:
    """job_concurrency=N: N jobs run at once, never more, even with more queued."""
    n = 3
    app = new_app(job_concurrency=n)
    gate = asyncio.Event()
    now = {"running": 0, "peak": 0}

    @app.job
    async def hold(i: int) -> int:
        now["running"] += 1
        now["peak"] = max(now["peak"], now["running"])
        try:
            await gate.wait()
        finally:
            now["running"] -= 1
        return i

    async with Running(app):
        results = [await hold.delay(i) for i in range(2 * n + 1)]
        await eventually(lambda: now["running"] == n, f"{n} jobs running")
        await asyncio.sleep(QUIET)
        assert now["running"] == n and now["peak"] == n
        statuses = [await r.status() for r in results]
        assert statuses.count(JobStatus.EXECUTING) == n
        assert statuses.count(JobStatus.SENT) == n + 1
        gate.set()
        assert [await r.get(timeout=HANG_GUARD) for r in results] == list(range(2 * n + 1))
    assert now["peak"] == n


# Job ids.


async def test_job_id_enqueues_once_while_queued(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """delay(job_id=...) twice while the first is still queued (or many at once): one job,
    one run; every handle gives its result (later calls' arguments are ignored)."""
    app = new_app()
    runs: list[int] = []

    @app.job
    async def once(n: int) -> int:
        runs.append(n)
        return n

    r1 = await once.delay(1, job_id="x")
    r2 = await once.delay(2, job_id="x")
    assert r1.id == r2.id == "x"
    # Concurrent callers share one enqueue call: the id is still taken once.
    together = await asyncio.gather(*(once.delay(10 + i, job_id="g") for i in range(5)))
    assert {r.id for r in together} == {"g"}
    assert queue_state(redis_client, app)[0] == 2
    async with Running(app):
        assert await r1.get(timeout=HANG_GUARD) == 1
        assert await r2.get(timeout=HANG_GUARD) == 1
        assert [await r.get(timeout=HANG_GUARD) for r in together] == [10] * 5
        await asyncio.sleep(QUIET)
    assert sorted(runs) == [1, 10]


async def test_job_id_enqueues_once_while_running(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """delay(job_id=...) again while that job is executing enqueues nothing more."""
    app = new_app()
    gate = asyncio.Event()
    runs: list[int] = []

    @app.job
    async def once(n: int) -> int:
        runs.append(n)
        await gate.wait()
        return n

    async with Running(app):
        r1 = await once.delay(1, job_id="y")
        await reach(r1, JobStatus.EXECUTING)
        r2 = await once.delay(2, job_id="y")
        assert queue_state(redis_client, app) == (1, 1)  # only the one being run
        assert await r2.status() is JobStatus.EXECUTING
        gate.set()
        assert await r2.get(timeout=HANG_GUARD) == 1
        assert await r1.get(timeout=HANG_GUARD) == 1
        await asyncio.sleep(QUIET)
    assert runs == [1]
    assert queue_state(redis_client, app) == (0, 0)


async def test_job_id_enqueues_once_after_success_until_results_ttl(new_app: NewApp) -> None:
    """After the job succeeded, its id stays taken while its record is kept (results_ttl):
    delay(job_id) returns the old result; once expired, the id runs anew."""
    app = new_app(results_ttl=1.5)
    runs: list[int] = []

    @app.job
    async def once(n: int) -> int:
        runs.append(n)
        return n

    async with Running(app):
        r1 = await once.delay(1, job_id="z")
        assert await r1.get(timeout=HANG_GUARD) == 1
        r2 = await once.delay(2, job_id="z")
        assert await r2.get(timeout=HANG_GUARD) == 1
        await asyncio.sleep(QUIET)
        assert runs == [1]

        async def expired() -> bool:
            return await r1.status() is JobStatus.UNKNOWN

        await until(expired, "the result expired")
        r3 = await once.delay(3, job_id="z")
        assert await r3.get(timeout=HANG_GUARD) == 3
    assert runs == [1, 3]


# Countdown and eta.


async def test_countdown_waits_for_the_clock(new_app: NewApp, redis_client: redis.Redis) -> None:
    """delay(countdown=60): SENT on the schedule at now+60, not run before the clock gets
    there (however long we wait), run once it does."""
    app = new_app()
    clock = manual(app)
    runs: list[float] = []

    @app.job
    async def later() -> str:
        runs.append(clock.now())
        return "ran"

    async with Running(app):
        r = await later.delay(countdown=60)
        assert due_score(redis_client, app, r.id) == T0 + 60
        info = await r.info()
        assert info is not None and info.due == T0 + 60
        await asyncio.sleep(QUIET)
        assert runs == [] and await r.status() is JobStatus.SENT
        assert queue_state(redis_client, app)[0] == 0

        clock.advance(59.5)
        await asyncio.sleep(QUIET)
        assert runs == [] and await r.status() is JobStatus.SENT

        clock.advance(1)
        assert await r.get(timeout=HANG_GUARD) == "ran"
        assert runs == [T0 + 60.5]
        assert due_score(redis_client, app, r.id) is None


@pytest.mark.usefixtures("far_from_utc")
@pytest.mark.parametrize(
    "eta",
    [
        pytest.param(datetime.fromtimestamp(T0 + 120, UTC), id="aware-utc"),
        pytest.param(
            datetime.fromtimestamp(T0 + 120, timezone(timedelta(hours=-7))), id="aware-other"
        ),
        pytest.param(datetime.fromtimestamp(T0 + 120, UTC).replace(tzinfo=None), id="naive"),
    ],
)
async def test_eta_waits_for_the_clock(
    new_app: NewApp, redis_client: redis.Redis, eta: datetime
) -> None:
    """delay(eta=...): due at that instant (a naive datetime is UTC, whatever the local
    time zone); SENT until the clock gets there, then run."""
    app = new_app()
    clock = manual(app)

    @app.job
    async def later() -> str:
        return "ran"

    async with Running(app):
        r = await later.delay(eta=eta)
        assert due_score(redis_client, app, r.id) == T0 + 120
        await asyncio.sleep(QUIET)
        assert await r.status() is JobStatus.SENT
        clock.advance(121)
        assert await r.get(timeout=HANG_GUARD) == "ran"


async def test_eta_in_the_past_and_zero_countdown_run_at_once(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """An eta already past (or countdown 0) goes straight onto the queue, never the
    schedule, and runs without the clock moving."""
    app = new_app()
    manual(app)

    @app.job
    async def now_please(n: int) -> int:
        return n

    r1 = await now_please.delay(1, eta=datetime.fromtimestamp(T0 - 3600, UTC))
    r2 = await now_please.delay(2, countdown=0)
    assert redis_client.zcard(key(app, "schedule")) == 0
    assert queue_state(redis_client, app)[0] == 2
    async with Running(app):
        assert await r1.get(timeout=HANG_GUARD) == 1
        assert await r2.get(timeout=HANG_GUARD) == 2


# Jobs the worker cannot run.


async def test_unknown_job_name_is_dead_and_the_worker_goes_on(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """A job enqueued by another App object of the same name, under a name this worker's
    app does not declare, ends DEAD (UnknownJob) at once; the worker keeps running jobs."""
    app = new_app()
    other = new_app()

    @app.job
    async def known() -> str:
        return "known"

    @other.job(retries=3)
    async def extra() -> None:
        pass

    r = await extra.delay()
    async with Running(app) as running:
        info = await reach(r, JobStatus.DEAD)
        assert info.tries == 1
        assert info.error is not None and info.error.type == "UnknownJob"
        with pytest.raises(JobFailed) as failed:
            await r.get(timeout=HANG_GUARD)
        assert failed.value.type == "UnknownJob"
        assert not running.done
        k = await known.delay()
        assert await k.get(timeout=HANG_GUARD) == "known"
        assert not running.done
    [(_, fields)] = redis_client.xrange(key(app, "dead"))
    assert fields[b"id"] == r.id.encode() and fields[b"name"] == b"extra"
    assert fields[b"error"].startswith(b"UnknownJob")


async def test_a_call_that_does_not_bind_on_the_worker_is_dead_at_once(new_app: NewApp) -> None:
    """An unannotated job whose enqueuer's declaration takes other arguments than the
    worker's: the call is refused on the worker (InvalidArguments, DEAD, no retries)
    rather than failing with TypeError on every try."""
    app = new_app()
    other = new_app()
    runs: list[Any] = []

    @app.job(name="loose", retries=3)
    async def loose(a):  # type: ignore[no-untyped-def]
        runs.append(a)

    @other.job(name="loose", retries=3)
    async def loose_elsewhere(a, b):  # type: ignore[no-untyped-def]
        pass

    r = await loose_elsewhere.delay(1, 2)
    async with Running(app):
        info = await reach(r, JobStatus.DEAD)
    assert info.tries == 1
    assert info.error is not None and info.error.type == "InvalidArguments"
    assert runs == []


async def test_the_worker_reads_arguments_and_writes_results_with_the_stored_codec(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """A job stored with another serializer than the worker's declaration (msgpack by the
    enqueuer, JSON by the worker) is decoded with the one it was stored with, and its
    result is written with it too, so any reader decodes it."""
    app = new_app()
    other = new_app()

    @app.job(name="echo")
    async def echo(data: bytes) -> bytes:
        return data * 2

    @other.job(name="echo", serializer="msgpack")
    async def echo_elsewhere(data: bytes) -> bytes:
        return data

    r = await echo_elsewhere.delay(b"\xff\x00")
    async with Running(app):
        assert await r.get(timeout=HANG_GUARD) == b"\xff\x00\xff\x00"
    assert redis_client.hget(key(app, f"job.{r.id}"), "codec") == b"msgpack"


async def test_delay_says_whether_it_stored_the_job(new_app: NewApp) -> None:
    """``result.enqueued``: True from the call that stored the job, False from a call whose
    job_id existed already; None on a handle made from an id."""
    app = new_app()

    @app.job
    async def once() -> None:
        pass

    first = await once.delay(job_id="only-once")
    again = await once.delay(job_id="only-once")
    synced = await asyncio.to_thread(once.delay_sync, job_id="only-once")
    assert (first.enqueued, again.enqueued, synced.enqueued) == (True, False, False)
    assert once.result("only-once").enqueued is None
    app.portal.call(app.aclose)


async def test_arguments_failing_on_the_worker_make_the_job_dead_at_once(new_app: NewApp) -> None:
    """Arguments that pass the enqueuer's signature but not the worker's (an app of the
    same name declaring the job differently) make the job DEAD without retries."""
    app = new_app()
    other = new_app()
    runs: list[int] = []

    @app.job(name="typed", retries=3)
    async def strict(n: int) -> int:
        runs.append(n)
        return n

    @other.job(name="typed", retries=3)
    async def loose(n: str) -> int:
        return 0

    r = await loose.delay("not a number")
    async with Running(app):
        info = await reach(r, JobStatus.DEAD)
        assert info.tries == 1
        assert info.error is not None and info.error.type == "InvalidArguments"
    assert runs == []


# Arguments.


async def test_bad_arguments_raise_at_delay_and_enqueue_nothing(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """delay() with arguments that do not bind or do not validate raises InvalidArguments
    (a TypeError) and stores nothing."""
    app = new_app()
    when = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    point = Point(x=1, when=when)

    @app.job
    async def takes(when: datetime, point: Point, nums: list[int], tag: str = "t") -> None:
        pass

    bad_calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((), {}),
        ((when, point), {}),
        ((when, point, [1], "t", "extra"), {}),
        ((when, point, [1]), {"nope": 1}),
        (("not a date", point, [1]), {}),
        ((when, {"x": "one"}, [1]), {}),
        ((when, point, ["x"]), {}),
        ((when, point, [1]), {"tag": object()}),
    ]
    for args, kwargs in bad_calls:
        with pytest.raises(InvalidArguments) as raised:
            await takes.delay(*args, **kwargs)
        assert isinstance(raised.value, TypeError)
        with pytest.raises(InvalidArguments):
            takes.delay_sync(*args, **kwargs)
    with pytest.raises(ValueError):
        await takes.delay(when, point, [1], countdown=1, eta=when)
    assert queue_state(redis_client, app) == (0, 0)
    assert job_keys(redis_client, app) == []
    assert redis_client.zcard(key(app, "schedule")) == 0


async def test_arguments_arrive_converted_and_current_job_tells_the_job(new_app: NewApp) -> None:
    """On the worker, arguments come back as their annotated types (datetime, Record,
    list[int] from JSON strings), and current_job() gives the job's id, name and tries."""
    app = new_app()
    when = datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    seen: list[Any] = []

    @app.job(retries=4)
    async def takes(when: datetime, point: Point, nums: list[int], tag: str = "t") -> str:
        seen.append((when, point, nums, tag, current_job()))
        return tag

    @app.job
    def takes_sync(point: Point) -> int:
        seen.append((point, current_job()))
        return point.x

    assert current_job() is None
    async with Running(app):
        r = await takes.delay(when, Point(x=1, when=when), ["1", 2], tag="hello")
        assert await r.get(timeout=HANG_GUARD) == "hello"
        s = await takes_sync.delay({"x": "7", "when": when.isoformat()})
        assert await s.get(timeout=HANG_GUARD) == 7
    (got_when, got_point, nums, tag, ctx), (sync_point, sync_ctx) = seen
    assert isinstance(got_when, datetime) and got_when == when
    assert isinstance(got_point, Point) and got_point == Point(x=1, when=when)
    assert nums == [1, 2] and all(type(n) is int for n in nums)
    assert tag == "hello"
    assert (ctx.id, ctx.name, ctx.tries, ctx.retries) == (r.id, "takes", 1, 4)
    assert not ctx.last_try
    assert isinstance(sync_point, Point) and sync_point == Point(x=7, when=when)
    assert (sync_ctx.id, sync_ctx.name, sync_ctx.tries) == (s.id, "takes_sync", 1)


# Timeouts.


async def test_job_timeout_fails_the_try_and_is_retried_then_dead(new_app: NewApp) -> None:
    """@app.job(timeout=0.2): a try running longer fails with TimeoutError, retried like any
    failure, and DEAD after the last try."""
    app = new_app()
    clock = manual(app)
    cancelled: list[int] = []

    @app.job(timeout=0.2, retries=1)
    async def slow() -> None:
        try:
            await asyncio.sleep(HANG_GUARD)
        except asyncio.CancelledError:
            cancelled.append(1)
            raise

    r = await slow.delay()
    async with Running(app):
        info = await reach(r, JobStatus.RETRY, tries=1)
        assert info.error is not None and info.error.type == "TimeoutError"
        clock.advance(PAST_BACKOFF)
        await reach(r, JobStatus.DEAD, tries=2)
        with pytest.raises(JobFailed) as failed:
            await r.get(timeout=HANG_GUARD)
    assert failed.value.type == "TimeoutError"
    assert "0.2" in failed.value.message
    assert cancelled == [1, 1]


async def test_a_timed_out_sync_job_does_not_fail_the_next_one(new_app: NewApp) -> None:
    """A plain-def job past its timeout keeps its thread (threads cannot be stopped); the
    next job is not failed for waiting behind it: it runs once a thread is free."""
    app = new_app(job_concurrency=1)
    release = threading.Event()
    ran: list[str] = []

    @app.job(timeout=0.2, retries=0)
    def stuck() -> None:
        ran.append("stuck")
        release.wait(HANG_GUARD)

    @app.job(timeout=0.2, retries=0)
    def quick() -> str:
        ran.append("quick")
        return "quick"

    try:
        async with Running(app):
            s = await stuck.delay()
            await reach(s, JobStatus.DEAD)
            q = await quick.delay()
            await asyncio.sleep(1.0)  # several of quick's timeouts, its thread still busy
            release.set()
            assert await q.get(timeout=HANG_GUARD) == "quick"
    finally:
        release.set()
    assert ran == ["stuck", "quick"]


async def test_a_result_that_cannot_be_stored_makes_the_job_dead(new_app: NewApp) -> None:
    """A return value the serializer cannot encode ends the job DEAD (EncodeError) at once,
    without retries."""
    app = new_app()
    runs: list[int] = []

    @app.job(retries=3)
    async def unstorable() -> Any:
        runs.append(1)
        return object()

    async with Running(app):
        r = await unstorable.delay()
        info = await reach(r, JobStatus.DEAD)
        assert info.tries == 1
        assert info.error is not None and info.error.type == "EncodeError"
        with pytest.raises(JobFailed) as failed:
            await r.get(timeout=HANG_GUARD)
        assert failed.value.type == "EncodeError"
    assert runs == [1]


# Graceful stop.


async def test_graceful_stop_lets_a_job_finish_within_the_grace_period(
    new_app: NewApp, caplog: pytest.LogCaptureFixture
) -> None:
    """A job running when stop() is called and finishing within default_grace_period is
    recorded as SUCCESS, and the worker exits 0."""
    caplog.set_level(logging.INFO, logger="runnel.jobs")
    app = new_app(default_grace_period=10)
    gate = asyncio.Event()

    @app.job
    async def finishing() -> str:
        await gate.wait()
        return "finished"

    r = await finishing.delay()
    running = Running(app)
    async with running:
        await reach(r, JobStatus.EXECUTING)
        running.worker.stop()
        await eventually(lambda: "waiting up to" in caplog.text, "the stop waits for the job")
        assert not running.done
        gate.set()
        assert await running.exit_code() == 0
    assert await r.status() is JobStatus.SUCCESS
    info = await r.info()
    assert info is not None and info.tries == 1
    assert await r.get(timeout=0) == "finished"


async def test_graceful_stop_puts_a_job_outliving_the_grace_period_back(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """A job still running when the grace period ends is cancelled and goes back to the
    queue unchanged (SENT, tries 0, its entry queued and not pending); the next worker
    runs it to SUCCESS with tries 1."""
    app = new_app(default_grace_period=0.3)
    state = {"block": True}
    runs: list[int] = []
    cancelled: list[int] = []

    @app.job
    async def outlives() -> int:
        ctx = current_job()
        assert ctx is not None
        runs.append(ctx.tries)
        if state["block"]:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(ctx.tries)
                raise
        return len(runs)

    r = await outlives.delay()
    async with Running(app) as running:
        await reach(r, JobStatus.EXECUTING, tries=1)
        assert await running.stop() == 0
    assert cancelled == [1]
    info = await r.info()
    assert info is not None
    assert (info.status, info.tries, info.error) == (JobStatus.SENT, 0, None)
    assert queue_state(redis_client, app) == (1, 0)
    [(_, fields)] = redis_client.xrange(key(app, "queue"))
    assert fields == {b"id": r.id.encode()}
    assert await app.job_store.executors() == []

    state["block"] = False
    async with Running(app):
        assert await r.get(timeout=HANG_GUARD) == 2
        info = await reach(r, JobStatus.SUCCESS)
        assert info.tries == 1
    assert runs == [1, 1]
    assert queue_state(redis_client, app) == (0, 0)


async def test_graceful_stop_of_a_retried_job_keeps_it_retry(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """A job cancelled by a stop on its second try goes back to the queue as RETRY with the
    first try still counted."""
    app = new_app(default_grace_period=0.3)
    clock = manual(app)
    runs: list[int] = []

    @app.job(retries=3)
    async def second_try_hangs() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("first")
        await asyncio.Event().wait()

    r = await second_try_hangs.delay()
    async with Running(app) as running:
        await reach(r, JobStatus.RETRY, tries=1)
        clock.advance(PAST_BACKOFF)
        await reach(r, JobStatus.EXECUTING, tries=2)
        assert await running.stop() == 0
    info = await r.info()
    assert info is not None and (info.status, info.tries) == (JobStatus.RETRY, 1)
    assert queue_state(redis_client, app) == (1, 0)


# Recovery from executors that stopped beating.


async def test_a_job_of_a_dead_executor_is_retried_elsewhere(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """A job EXECUTING at an executor whose heartbeat expired is taken back by a live worker:
    the try counts as failed (RETRY, error WorkerLost), then it runs again and succeeds."""
    app = new_app()
    clock = manual(app)
    runs: list[int] = []

    @app.job(retries=2)
    async def work() -> int:
        ctx = current_job()
        assert ctx is not None
        runs.append(ctx.tries)
        return ctx.tries

    r = await work.delay()
    [taken] = await ghost_takes(app, clock)
    assert (taken.id, taken.tries) == (r.id, 1)
    info = await r.info()
    assert info is not None
    assert (info.status, info.tries, info.executor) == (JobStatus.EXECUTING, 1, "ghost")

    async with Running(app) as running:
        info = await reach(r, JobStatus.RETRY)
        assert info.tries == 1
        assert info.error is not None and info.error.type == "WorkerLost"
        assert runs == []
        due = due_score(redis_client, app, r.id)
        assert due is not None and due > T0
        clock.set(due + 0.01)
        assert await r.get(timeout=HANG_GUARD) == 2
        info = await reach(r, JobStatus.SUCCESS)
        assert info.tries == 2
        assert runs == [2]
        assert running.worker.job_executor is not None
        states = await app.job_store.executors()
        assert [s.id for s in states] == [running.worker.job_executor.id]  # ghost forgotten
    assert queue_state(redis_client, app) == (0, 0)


async def test_a_job_on_its_last_try_at_a_dead_executor_is_dead(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """The executor running a job's last try stops beating: the job ends DEAD (WorkerLost)
    without running again."""
    app = new_app()
    clock = manual(app)
    runs: list[int] = []

    @app.job(retries=0)
    async def work() -> None:
        runs.append(1)

    r = await work.delay()
    [taken] = await ghost_takes(app, clock)
    assert taken.id == r.id
    async with Running(app):
        info = await reach(r, JobStatus.DEAD)
        assert info.tries == 1
        assert info.error is not None and info.error.type == "WorkerLost"
        with pytest.raises(JobFailed) as failed:
            await r.get(timeout=HANG_GUARD)
        assert failed.value.type == "WorkerLost"
        await asyncio.sleep(QUIET)
    assert runs == []
    [(_, fields)] = redis_client.xrange(key(app, "dead"))
    assert fields[b"id"] == r.id.encode() and fields[b"error"].startswith(b"WorkerLost")
    assert queue_state(redis_client, app) == (0, 0)


async def test_a_job_read_but_not_started_by_a_dead_executor_goes_back_uncounted(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """An entry an executor read (XREADGROUP) but never started goes back to the queue as
    it was when that executor's heartbeat expires: run once, with tries 1."""
    app = new_app()
    runs: list[int] = []

    @app.job(retries=0)
    async def work() -> int:
        ctx = current_job()
        assert ctx is not None
        runs.append(ctx.tries)
        return ctx.tries

    r = await work.delay()
    store = app.job_store
    await store.prepare()
    await store.beat("ghost", {"host": "nowhere", "pid": 1}, 0.5)
    read = redis_client.xreadgroup(GROUP, "ghost", {key(app, "queue"): ">"}, count=1)
    assert len(read[0][1]) == 1
    assert queue_state(redis_client, app) == (1, 1)
    info = await r.info()
    assert info is not None and (info.status, info.tries) == (JobStatus.SENT, 0)

    async with Running(app):
        assert await r.get(timeout=HANG_GUARD) == 1
        info = await reach(r, JobStatus.SUCCESS)
        assert (info.tries, info.error) == (1, None)
    assert runs == [1]
    assert queue_state(redis_client, app) == (0, 0)


async def test_a_stale_outcome_of_a_taken_back_delivery_is_refused(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """An executor presumed dead whose job was taken back and run elsewhere cannot record
    its late outcome: finish() refuses it and the live worker's outcome stands."""
    app = new_app()
    clock = manual(app)

    @app.job(retries=2)
    async def work() -> int:
        ctx = current_job()
        assert ctx is not None
        return ctx.tries

    r = await work.delay()
    [taken] = await ghost_takes(app, clock)
    async with Running(app):
        await reach(r, JobStatus.RETRY)
        due = due_score(redis_client, app, r.id)
        assert due is not None
        clock.set(due + 0.01)
        assert await r.get(timeout=HANG_GUARD) == 2

        store = app.job_store
        now = clock.now()
        stale = [
            Outcome("success", taken.ticket, r.id, now, result=None),
            Outcome("dead", taken.ticket, r.id, now, error=ErrorInfo("Late", "too late")),
        ]
        for outcome in stale:
            assert await store.finish("ghost", [outcome], 60) == [r.id]
        info = await reach(r, JobStatus.SUCCESS)
        assert info.tries == 2
        assert await r.get(timeout=0) == 2
    assert redis_client.xlen(key(app, "dead")) == 0
    assert queue_state(redis_client, app) == (0, 0)


async def test_recovery_is_refused_while_the_executor_beats(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """Taking back the deliveries of an executor that beats (again) is refused whole: its
    job stays EXECUTING there."""
    app = new_app()
    clock = manual(app)

    @app.job
    async def work() -> None:
        pass

    r = await work.delay()
    [taken] = await ghost_takes(app, clock, beat_ttl=30)
    store = app.job_store
    [abandoned] = await store.abandoned("ghost", 10)
    assert (abandoned.id, abandoned.started, abandoned.tries) == (r.id, True, 1)
    lost = ErrorInfo("WorkerLost", "presumed dead")
    outcome = Outcome("retry", taken.ticket, r.id, clock.now(), error=lost, due=T0 + 1)
    assert await store.finish("ghost", [outcome], 60, only_if_dead=True) == [r.id]
    info = await r.info()
    assert info is not None
    assert (info.status, info.tries, info.executor) == (JobStatus.EXECUTING, 1, "ghost")
    assert queue_state(redis_client, app) == (1, 1)
    assert not await store.forget("ghost")


async def test_a_worker_cancelled_hard_puts_its_job_back_uncounted(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """A worker task cancelled outright (a second signal: no grace period) while running a
    job still makes one quick attempt to put the job back: SENT again, its try not
    counted, and the next worker runs it as its first try. (A worker that dies instead
    leaves it to recovery, as a failed try: the ghost-executor tests above.)"""
    app = new_app()
    state = {"block": True}
    runs: list[int] = []

    @app.job(retries=2)
    async def work() -> int:
        ctx = current_job()
        assert ctx is not None
        runs.append(ctx.tries)
        if state["block"]:
            await asyncio.Event().wait()
        return ctx.tries

    r = await work.delay()
    first = Running(app)
    await first.__aenter__()
    assert first.task is not None
    try:
        await reach(r, JobStatus.EXECUTING, tries=1)
        first.task.cancel()
        first.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first.task
    finally:
        if not first.task.done():
            first.task.cancel()
    info = await r.info()
    assert info is not None
    assert (info.status, info.tries, info.error) == (JobStatus.SENT, 0, None)
    assert queue_state(redis_client, app) == (1, 0)
    state["block"] = False
    async with Running(app):
        assert await r.get(timeout=HANG_GUARD) == 1
    assert runs == [1, 1]
    assert queue_state(redis_client, app) == (0, 0)


# Looking at the queue.


async def test_the_queue_holds_only_unfinished_work(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """Once jobs finished (straight success, success after a retry, dead), the queue stream
    is empty and nothing is pending in its group."""
    app = new_app()
    clock = manual(app)
    failed_once: set[int] = set()

    @app.job(retries=1)
    async def mixed(n: int) -> int:
        if n % 3 == 1 and n not in failed_once:
            failed_once.add(n)
            raise RuntimeError("once")
        if n % 3 == 2:
            raise RuntimeError("always")
        return n

    async with Running(app):
        results = [await mixed.delay(n) for n in range(9)]
        for r in results[1::3]:
            await reach(r, JobStatus.RETRY)
        for r in results[2::3]:
            await reach(r, JobStatus.RETRY)
        clock.advance(PAST_BACKOFF)
        for n, r in enumerate(results):
            await reach(r, JobStatus.DEAD if n % 3 == 2 else JobStatus.SUCCESS)
        assert queue_state(redis_client, app) == (0, 0)
        counts = await app.job_store.counts(clock.now())
        assert (counts.queued, counts.executing, counts.scheduled) == (0, 0, 0)
        assert (counts.dead, counts.results) == (3, 6)


async def test_counts_and_executors_describe_the_queue(
    new_app: NewApp, redis_client: redis.Redis
) -> None:
    """counts() reports queued, executing, scheduled (with the next due time), dead and
    results kept; executors() reports the live executor with its host and pid, and forgets
    it once it stopped."""
    app = new_app(job_concurrency=1)
    clock = manual(app)
    gate = asyncio.Event()

    @app.job(retries=0)
    async def ok() -> int:
        return 1

    @app.job(retries=0)
    async def bad() -> None:
        raise RuntimeError("bad")

    @app.job
    async def hold() -> None:
        await gate.wait()

    store = app.job_store
    assert await store.counts(clock.now()) == QueueCounts(0, 0, 0, 0, 0, None)
    async with Running(app) as running:
        executor = running.worker.job_executor
        assert executor is not None
        await reach(await ok.delay(), JobStatus.SUCCESS)
        await reach(await bad.delay(), JobStatus.DEAD)
        h = await hold.delay()
        await reach(h, JobStatus.EXECUTING)
        await hold.delay()  # waits for the only slot
        await ok.delay(countdown=30)
        await ok.delay(countdown=60)

        counts = await app.job_store.counts(clock.now())
        assert counts == QueueCounts(
            queued=1,
            executing=1,
            scheduled=2,
            dead=1,
            results=1,
            next_due=T0 + 30,
            totals=JobTotals(succeeded=1, retried=0, dead=1),
        )
        [state] = await app.job_store.executors()
        assert state.id == executor.id and state.alive
        assert state.info["host"] == socket.gethostname()
        assert state.info["pid"] == os.getpid()
        assert state.info["concurrency"] == 1
        assert state.info["worker"] == running.worker.id
        await until(
            lambda: _executor_info(app, "running", 1), "the heartbeat reports the running job"
        )
        gate.set()
    assert await app.job_store.executors() == []


async def _executor_info(app: App, field: str, value: object) -> bool:
    states = await app.job_store.executors()
    return bool(states) and states[0].info.get(field) == value
