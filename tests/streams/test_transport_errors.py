"""Only store failures are retried: a bug stops the worker, and a cancellation is never
lost at runnel-redis's seam."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from runnel import Record
from runnel.exceptions import Unavailable
from runnel.store.log import PartitionId
from runnel_redis.transport import RedisTransport
from tests.support.apps import Running, make_app


class Ping(Record):
    key: str
    n: int


async def test_a_bug_in_a_store_call_stops_the_worker(
    redis_url: str, app_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A heartbeat that fails with an error that is not a transport error (a bug) ends
    the worker with that error, instead of being retried forever."""
    app = make_app(app_name, redis_url, default_lock_expiry=1.5)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)

    @app.processor(pings)
    async def proc(events: Any) -> None:
        async for _ in events.records():
            pass

    calls: list[int] = []

    async def buggy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        raise TypeError("a bug in the store")

    with pytest.raises(TypeError, match="a bug in the store"):
        async with Running(app) as running:
            executor = running.worker.executors[0]
            await running.until(lambda: executor.runner.owned, "partitions taken")
            monkeypatch.setattr(executor.coordination, "beat", buggy)
            await running.exit_code()
    assert calls == [1], "not retried"


async def test_an_outage_is_retried(
    redis_url: str, app_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same heartbeat failing as the seam reports Redis being away is retried."""
    app = make_app(app_name, redis_url, default_lock_expiry=1.5)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)

    @app.processor(pings)
    async def proc(events: Any) -> None:
        async for _ in events.records():
            pass

    calls: list[int] = []

    async with Running(app) as running:
        executor = running.worker.executors[0]
        await running.until(lambda: executor.runner.owned, "partitions taken")
        beat = executor.coordination.beat

        async def flaky(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            if len(calls) <= 2:
                raise Unavailable("Redis went away for a moment")
            return await beat(*args, **kwargs)

        monkeypatch.setattr(executor.coordination, "beat", flaky)
        await running.until(lambda: len(calls) > 3, "beating again")
        assert await running.stop() == 0


async def test_one_cancellation_stops_a_loop_of_store_calls(redis_url: str) -> None:
    """Cancel a loop polling Redis through the transport at random moments: every time,
    the single cancellation ends it (redis-py on Python 3.11 drops some; the seam raises
    them again). A loop that carries on stops itself after a few more calls."""
    transport = RedisTransport(redis_url)
    rng = random.Random(13)
    ignored = 0
    try:
        for _ in range(300):
            cancelled = asyncio.Event()

            async def polling(cancelled: asyncio.Event = cancelled) -> str:
                extra = 0
                while True:
                    await transport.lengths([PartitionId("runnel-test", "none", 0)])
                    if cancelled.is_set():
                        extra += 1
                        if extra == 3:
                            return "ignored"

            task = asyncio.create_task(polling())
            for _ in range(rng.randrange(1, 40)):
                await asyncio.sleep(0)
            task.cancel()
            cancelled.set()
            try:
                await task
            except asyncio.CancelledError:
                continue
            ignored += 1
    finally:
        await transport.aclose()
    assert ignored == 0
