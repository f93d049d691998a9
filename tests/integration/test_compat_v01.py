"""runnel 0.1's way of running things, against the private redis-server.

0.1's guide: ``Worker(app).start()`` runs the app's processors (or a list of names);
``app.redis`` is an asyncio Redis client for the app's own commands; ``event.group`` is
the consumer group and ``event.recovering`` says whether the event is a redelivery.
"""

from __future__ import annotations

import asyncio

import redis

from runnel import ExceptionPolicy, Record, context
from runnel.worker import Worker

from .conftest import make_app


class Ping(Record):
    key: str
    n: int


class Boom(Exception):
    pass


async def test_app_redis_is_a_plain_asyncio_client(redis_url: str, app_name: str) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    try:
        await app.redis.set("mine", "v")
        assert await app.redis.get("mine") == b"v"
        await pings.send(Ping(key="a", n=1))
        assert await app.redis.xlen(pings.partition_key(0)) == 1
        assert app.redis is app.redis  # one client per event loop
    finally:
        await app.aclose()


def test_worker_start_runs_processors_and_marks_redeliveries(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    """Two 0.1-style starts: each HALTs on the one event, so the second sees it again."""
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    seen: list[tuple] = []

    @app.processor(pings, exception_policy=ExceptionPolicy.HALT)
    async def proc(events):
        async for event in events:
            where = (
                context.worker_id.get() is not None,
                context.stream.get(),
                context.partition_id.get(),
                context.executor_id.get(),
            )
            seen.append((event.record, event.group, event.recovering, where))
            raise Boom

    async def send() -> None:
        try:
            await pings.send(Ping(key="a", n=1))
        finally:
            await app.aclose()

    asyncio.run(send())
    assert Worker(app).start() == 1
    assert Worker(app).start(["proc"]) == 1
    where = (True, "pings", 0, "proc")
    assert seen == [
        (Ping(key="a", n=1), "proc", False, where),
        (Ping(key="a", n=1), "proc", True, where),
    ]
    # The failed event is still pending in the group, as HALT leaves it.
    assert redis_client.xpending(pings.partition_key(0), "proc")["pending"] == 1
