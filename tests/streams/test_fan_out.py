"""Many concurrent calls from one process: each waits for a connection, none fails.

A web view checking a page of jobs, ``delay()`` or ``send()`` in a ``gather``: more calls
at once than the client keeps connections (``redis_max_connections``) must queue for a
connection, not raise. The same tests run on a Redis Cluster (tests/redis_cluster).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from runnel import App, Record
from runnel.admin.status import status_report
from runnel.jobs import JobStatus, Timeout
from runnel.testing import run

CALLS = 5_000


class Ping(Record):
    n: int


def fan_app(name: str, redis_url: str, **settings: Any) -> App:
    app = App(name=name, redis_url=redis_url, **settings)
    pings = app.stream("pings", record=Ping, partition_by="n", partition_count=4)

    @app.processor(pings)
    async def watch(events: Any) -> None:  # declared for the status reads; never run here
        async for _ in events:
            pass

    @app.job()
    async def double(n: int) -> int:
        return 2 * n

    return app


async def all_at_once(calls: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    return await asyncio.gather(*(call() for call in calls))


async def test_sends_and_delays_at_once_all_succeed(redis_url: str, app_name: str) -> None:
    app = fan_app(app_name, redis_url)
    pings = app.streams["pings"]
    double = app.jobs["double"]
    try:
        await all_at_once([lambda n=n: pings.send(Ping(n=n)) for n in range(CALLS)])
        results = await all_at_once([lambda n=n: double.delay(n) for n in range(CALLS)])
        assert sum(
            (await app.store.admin().lengths([p.id for p in pings.partitions])).values()
        ) == (CALLS)
        statuses = await all_at_once([r.status for r in results])
        assert set(statuses) == {JobStatus.SENT}
        # get() of jobs that have not run: each waits its (short) timeout, all at once.
        with_timeout = [lambda r=r: _get_or_timeout(r) for r in results]
        assert set(await all_at_once(with_timeout)) == {"timeout"}
    finally:
        await app.aclose()


async def _get_or_timeout(result: Any) -> str:
    try:
        await result.get(timeout=0.2)
    except Timeout:
        return "timeout"
    return "done"


async def test_results_fetched_at_once_all_succeed(redis_url: str, app_name: str) -> None:
    app = fan_app(app_name, redis_url)
    double = app.jobs["double"]
    async with run(app, store=redis_url, processors=[]) as t:
        results = await all_at_once([lambda n=n: double.delay(n) for n in range(CALLS)])
        await t.join()
        values = await all_at_once([lambda r=r: r.get(timeout=5) for r in results])
        assert values == [2 * n for n in range(CALLS)]
        assert set(await all_at_once([r.status for r in results])) == {JobStatus.SUCCESS}


async def test_status_reads_at_once_all_succeed(redis_url: str, app_name: str) -> None:
    app = fan_app(app_name, redis_url)
    try:
        reports = await all_at_once([lambda: status_report(app) for _ in range(CALLS // 10)])
        assert {len(r["processors"][0]["partitions"]) for r in reports} == {4}
        keys = [p.id for p in app.streams["pings"].partitions]
        backlogs = await all_at_once(
            [lambda: app.store.admin().backlog(keys, "watch") for _ in range(CALLS)]
        )
        assert len(backlogs) == CALLS
    finally:
        await app.aclose()


async def test_the_bound_is_a_setting(redis_url: str, app_name: str) -> None:
    """With two connections, 5,000 calls still all succeed, one after another."""
    app = fan_app(app_name, redis_url, redis_max_connections=2)
    pings = app.streams["pings"]
    try:
        await all_at_once([lambda n=n: pings.send(Ping(n=n)) for n in range(CALLS)])
        lengths = await app.store.admin().lengths([p.id for p in pings.partitions])
        assert sum(lengths.values()) == CALLS
    finally:
        await app.aclose()


async def test_a_wait_cancelled_after_its_turn_came_passes_the_turn_on(redis_url: str) -> None:
    """A caller woken for a free connection and cancelled before it took it: the next
    waiter gets the connection (else it would wait for a release that never comes)."""
    from runnel_redis import pool

    client = pool.client(redis_url, 1)
    try:
        held = await client.connection_pool.get_connection()
        first = asyncio.create_task(client.ping())
        second = asyncio.create_task(client.ping())
        await asyncio.sleep(0.1)  # both wait
        await client.connection_pool.release(held)  # the first one's turn
        first.cancel()
        assert await asyncio.wait_for(second, 30) is True
        assert first.cancelled()
    finally:
        await client.aclose()
