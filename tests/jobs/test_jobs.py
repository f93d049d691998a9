"""The job queue, on both stores: results, retries with backoff, dead letters and replay,
idempotent ids, countdowns, and jobs taken back from a worker that died."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from runnel import App
from runnel.exceptions import EncodeError
from runnel.jobs import JobFailed, JobStatus, ManualClock, current_job
from runnel.testing import run

T0 = 1_700_000_000.0


def jobs_app(name: str) -> App:
    return App(name=name, job_heartbeat_timeout=1, default_grace_period=1)


async def test_a_job_runs_and_its_result_is_kept(app_name: str, store_url: str) -> None:
    app = jobs_app(app_name)

    @app.job
    async def add(a: int, b: int) -> int:
        return a + b

    async with run(app, store=store_url) as t:
        result = await add.delay(2, 3)
        assert await result.get(timeout=t.wait) == 5
        await t.join()
        assert await result.status() == JobStatus.SUCCESS
        counts = await t.job_counts()
        assert (counts.queued, counts.executing, counts.dead) == (0, 0, 0)


async def test_a_plain_function_job_and_delay_sync(app_name: str, store_url: str) -> None:
    app = jobs_app(app_name)

    @app.job
    def shout(word: str) -> str:
        return word.upper()

    async with run(app, store=store_url) as t:
        # From a thread, as a web view would call it (the worker runs in this loop).
        result = await asyncio.to_thread(shout.delay_sync, "hi")
        assert await asyncio.to_thread(result.get, t.wait) == "HI"
        assert await shout.delay("ho") is not None


async def test_retries_back_off_by_the_apps_clock(app_name: str, store_url: str) -> None:
    app = jobs_app(app_name)
    clock = ManualClock(T0)
    tries: list[int] = []

    @app.job(retries=2)
    async def flaky() -> str:
        ctx = current_job()
        assert ctx is not None
        tries.append(ctx.tries)
        if ctx.tries < 3:
            raise ConnectionError("not yet")
        return "done"

    async with run(app, store=store_url, clock=clock) as t:
        result = await flaky.delay()
        await t.join()  # the first try failed; the retry waits for its backoff
        assert tries == [1]
        info = await result.info()
        assert info is not None
        assert (info.status, info.error and info.error.type) == (JobStatus.RETRY, "ConnectionError")
        assert info.due is not None and info.due > T0
        clock.advance(60)
        await t.join()
        assert tries == [1, 2]
        clock.advance(60)
        await t.join()
        assert tries == [1, 2, 3]
        assert await result.get(timeout=t.wait) == "done"


async def test_a_job_that_always_fails_is_dead_and_can_be_replayed(
    app_name: str, store_url: str
) -> None:
    app = jobs_app(app_name)
    clock = ManualClock(T0)
    fail = {"on": True}

    @app.job(retries=1)
    async def fragile(n: int) -> int:
        if fail["on"]:
            raise ValueError(f"bad {n}")
        return n

    async with run(app, store=store_url, clock=clock) as t:
        result = await fragile.delay(7)
        await t.join()
        clock.advance(60)
        await t.join()
        with pytest.raises(JobFailed) as failed:
            await result.get(timeout=t.wait)
        assert (failed.value.type, failed.value.message) == ("ValueError", "bad 7")
        [letter] = await t.dead_letters()
        assert (letter.id, letter.name, letter.error) == (result.id, "fragile", "ValueError: bad 7")
        fail["on"] = False
        assert await t.job_store.replay([letter], clock.now()) == 1
        await t.join()
        assert await result.get(timeout=t.wait) == 7
        assert await t.dead_letters() == []


async def test_one_job_id_runs_once(app_name: str, store_url: str) -> None:
    app = jobs_app(app_name)
    runs: list[str] = []

    @app.job
    async def charge(order: str) -> str:
        runs.append(order)
        return order

    async with run(app, store=store_url) as t:
        first = await charge.delay("o1", job_id="charge-o1")
        again = await charge.delay("o1", job_id="charge-o1")
        assert first.id == again.id == "charge-o1"
        await t.join()
        assert runs == ["o1"]


async def test_a_countdown_waits_for_the_clock(app_name: str, store_url: str) -> None:
    app = jobs_app(app_name)
    clock = ManualClock(T0)
    runs: list[float] = []

    @app.job
    async def later() -> None:
        runs.append(clock.now())

    async with run(app, store=store_url, clock=clock) as t:
        result = await later.delay(countdown=30)
        await t.join()
        assert runs == []
        assert await result.status() == JobStatus.SENT
        assert (await t.job_counts()).next_due == T0 + 30
        clock.advance(30)
        await t.join()
        assert runs == [T0 + 30]


async def test_jobs_of_a_worker_that_died_are_taken_back(app_name: str, store_url: str) -> None:
    """A job held by an executor that stopped beating (its process died) is taken back by
    a live worker as a failed try (WorkerLost), and run again."""
    app = jobs_app(app_name)
    clock = ManualClock(T0)

    @app.job(retries=1)
    async def work() -> str:
        ctx = current_job()
        assert ctx is not None
        return f"try {ctx.tries}"

    async with run(app, store=store_url, clock=clock, workers=0) as t:
        result = await work.delay()
        # A worker that took the job, then died: it beat once and never finished.
        store = t.job_store
        await store.prepare()
        await store.beat("ghost", {"pid": 0}, 0.2)
        [taken] = await store.take("ghost", 1, 0, clock)
        assert taken.id == result.id
        await t.start_worker()
        info = None
        while info is None or info.status != JobStatus.RETRY:
            await asyncio.sleep(0.05)
            info = await result.info()
        assert info.error is not None and info.error.type == "WorkerLost"
        clock.advance(60)
        assert await result.get(timeout=t.wait) == "try 2"


async def test_a_job_running_when_its_worker_is_stopped_hard_runs_again(
    app_name: str, store_url: str
) -> None:
    app = jobs_app(app_name)
    started = asyncio.Event()
    runs: list[int] = []

    @app.job(retries=0)
    async def long() -> int:
        ctx = current_job()
        assert ctx is not None
        runs.append(ctx.tries)
        if len(runs) == 1:
            started.set()
            await asyncio.Event().wait()
        return ctx.tries

    async with run(app, store=store_url) as t:
        result = await long.delay()
        await asyncio.wait_for(started.wait(), t.wait)
        await t.stop_worker(hard=True)
        await t.start_worker()
        assert await result.get(timeout=t.wait) == 1  # put back uncounted: a first try again
        assert runs == [1, 1]


async def test_several_workers_share_the_queue(app_name: str, store_url: str) -> None:
    app = jobs_app(app_name)
    ran_by: dict[int, str] = {}

    @app.job
    async def square(n: int) -> int:
        await asyncio.sleep(0.001)
        ran_by[n] = "x"
        return n * n

    async with run(app, store=store_url, workers=3) as t:
        results = [await square.delay(n) for n in range(30)]
        await t.join()
        assert [await r.get(timeout=t.wait) for r in results] == [n * n for n in range(30)]
        assert sorted(ran_by) == list(range(30))


async def test_a_delivery_held_in_a_live_workers_name_that_it_does_not_run_goes_back(
    app_name: str, store_url: str
) -> None:
    """What a Redis failover can leave: the store still has a job as taken by a worker
    that is alive and beating, while the worker knows nothing of it (its outcome was
    recorded, then lost with an unreplicated write). Here the test takes the job in the
    live worker's name itself. The worker puts it back, its try not counted, and runs it."""
    app = App(name=app_name, job_heartbeat_timeout=0.4, job_concurrency=1)
    gate, holding = asyncio.Event(), asyncio.Event()
    runs: list[tuple[str, int]] = []

    @app.job
    async def hold() -> None:
        holding.set()
        await gate.wait()

    @app.job
    async def work() -> int:
        ctx = current_job()
        assert ctx is not None
        runs.append((ctx.id, ctx.tries))
        return ctx.tries

    async with run(app, store=store_url) as t:
        held = await hold.delay()
        await asyncio.wait_for(holding.wait(), t.wait)
        # Its one slot is taken: the worker asks for no job until `hold` ends.
        [executor] = await t.job_store.executors()
        result = await work.delay()
        [taken] = await t.job_store.take(executor.id, 1, 0, app.clock)
        assert taken.id == result.id
        gate.set()
        assert await result.get(timeout=t.wait) == 1  # the lost try not counted
        assert runs == [(result.id, 1)]
        assert await held.status() == JobStatus.SUCCESS
        await t.join()
        counts = await t.job_counts()
        assert (counts.queued, counts.executing, counts.dead) == (0, 0, 0)


async def test_what_the_serializer_cannot_carry_is_refused_at_delay(
    app_name: str, store_url: str
) -> None:
    """JSON has no NaN: refused at the call, naming the argument (before, it was stored as
    null: the job ended DEAD with InvalidArguments, or an unannotated one got None).
    msgpack carries NaN and the infinities; JSON carries integers of any size exactly
    (before, they came back as floats); a NaN returned over JSON ends the job DEAD."""
    app = jobs_app(app_name)

    @app.job
    def half(x: float) -> float:
        return x / 2

    @app.job
    def echo(x: Any) -> Any:
        return x

    @app.job(serializer="msgpack")
    def packed_half(x: float) -> float:
        return x / 2

    @app.job
    def undefined() -> float:
        return math.nan

    async with run(app, store=store_url) as t:
        with pytest.raises(EncodeError, match=r"job 'half': cannot encode the arguments: "):
            await half.delay(math.nan)
        with pytest.raises(EncodeError, match=r"args\[0\]\[1\]\.a: inf: JSON has no NaN"):
            await echo.delay([1, {"a": math.inf}])
        with pytest.raises(EncodeError, match=r"kwargs\.x: nan"):
            half.delay_sync(x=math.nan)
        counts = await t.job_counts()
        assert (counts.queued, counts.executing, counts.dead) == (0, 0, 0)

        assert await (await echo.delay(2**70)).get(timeout=t.wait) == 2**70
        assert await (await echo.delay([-(2**64)])).get(timeout=t.wait) == [-(2**64)]
        assert await (await packed_half.delay(-math.inf)).get(timeout=t.wait) == -math.inf
        assert math.isnan(await (await packed_half.delay(math.nan)).get(timeout=t.wait))
        with pytest.raises(EncodeError, match=r"args\[0\]: 2361183241434822606848 is beyond"):
            await packed_half.delay(2**71)

        result = await undefined.delay()
        with pytest.raises(JobFailed) as failed:
            await result.get(timeout=t.wait)
        assert failed.value.type == "EncodeError"
        assert "nan: JSON has no NaN or infinity" in str(failed.value)
        await t.join()
