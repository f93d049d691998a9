"""Middleware: chained in list order; clean-up around ``yield`` runs, and finishes, before
the processor is restarted or the partition given up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis

from runnel import Event, ExceptionPolicy, Partition, Record
from runnel.interfaces import Middleware
from tests.support.apps import Running, make_app, pending_ids


class Ping(Record):
    key: str
    n: int


class Boom(Exception):
    pass


class Tracer(Middleware):
    """Records each item it passes on, and the keyword arguments it was given."""

    def __init__(self, name: str, marks: list[Any]) -> None:
        self.name = name
        self.marks = marks
        self.kwargs: list[dict[str, Any]] = []

    async def handler(self, parent: AsyncIterator[Any], **kwargs: Any) -> AsyncIterator[Any]:
        self.kwargs.append(kwargs)
        async for item in parent:
            self.marks.append((self.name, item.record.n))
            yield item


class FinallyCleanup(Middleware):
    """Clean-up in a ``finally:`` around the yield (it also runs after each normal step)."""

    def __init__(self, marks: list[str]) -> None:
        self.marks = marks

    async def handler(self, parent: AsyncIterator[Any], **kwargs: Any) -> AsyncIterator[Any]:
        context = kwargs["context"]
        async for event in parent:
            n = event.record.n
            try:
                yield event
            finally:
                if context.exception is not None:
                    await asyncio.sleep(0.01)  # an asynchronous clean-up
                    self.marks.append(f"finally {n} {type(context.exception).__name__}")


class GeneratorExitCleanup(Middleware):
    """Clean-up in ``except GeneratorExit:`` around the yield (only when closed early)."""

    def __init__(self, marks: list[str]) -> None:
        self.marks = marks

    async def handler(self, parent: AsyncIterator[Any], **kwargs: Any) -> AsyncIterator[Any]:
        context = kwargs["context"]
        async for event in parent:
            n = event.record.n
            try:
                yield event
            except GeneratorExit:
                await asyncio.sleep(0.01)
                name = type(context.exception).__name__ if context.exception else "None"
                self.marks.append(f"exit {n} {name}")
                raise


async def test_middleware_chain_in_list_order(redis_url: str, app_name: str) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    marks: list[Any] = []
    first, second, third = Tracer("first", marks), Tracer("second", marks), Tracer("third", marks)

    @app.processor(pings, middleware=[first, second, third])
    async def proc(events):
        async for event in events:
            assert isinstance(event, Event)
            marks.append(("proc", event.record.n))

    await pings.send(*[Ping(key="k", n=i) for i in range(5)])
    async with Running(app) as running:
        await running.until(lambda: ("proc", 4) in marks, "all events")
    assert marks == [(name, n) for n in range(5) for name in ("first", "second", "third", "proc")]
    for mw in (first, second, third):
        assert mw.kwargs, mw.name
        kwargs = mw.kwargs[0]
        assert isinstance(kwargs["partition"], Partition)
        assert kwargs["partition"] is pings.partitions[0]
        assert kwargs["context"].processor == "proc"


@pytest.mark.parametrize("cleanup", [FinallyCleanup, GeneratorExitCleanup])
async def test_cleanup_completes_before_the_processor_restarts(
    redis_url: str, app_name: str, cleanup: type[Middleware]
) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    marks: list[str] = []

    @app.processor(pings, exception_policy=ExceptionPolicy.IGNORE, middleware=[cleanup(marks)])
    async def proc(events):
        marks.append("start")
        async for event in events:
            n = event.record.n
            if n in (1, 3):
                marks.append(f"raise {n}")
                raise Boom(n)
            marks.append(f"proc {n}")

    await pings.send(*[Ping(key="k", n=i) for i in range(5)])
    async with Running(app) as running:
        await running.until(lambda: "proc 4" in marks, "all events")
        assert await running.stop() == 0
    word = "finally" if cleanup is FinallyCleanup else "exit"
    assert marks == [
        "start",
        "proc 0",
        "raise 1",
        f"{word} 1 Boom",
        "start",
        "proc 2",
        "raise 3",
        f"{word} 3 Boom",
        "start",
        "proc 4",
    ]


async def test_cleanup_of_every_middleware_runs_before_a_restart(
    redis_url: str, app_name: str
) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    outer: list[str] = []
    inner: list[str] = []
    marks: list[str] = []

    @app.processor(
        pings,
        exception_policy=ExceptionPolicy.IGNORE,
        middleware=[GeneratorExitCleanup(outer), FinallyCleanup(inner)],
    )
    async def proc(events):
        marks.append(f"start after {len(outer)}/{len(inner)} clean-ups")
        async for event in events:
            if event.record.n == 1:
                raise Boom(1)

    await pings.send(*[Ping(key="k", n=i) for i in range(3)])
    async with Running(app) as running:
        await running.until(lambda: len(marks) == 2, "the restart")
    assert outer == ["exit 1 Boom"]
    assert inner == ["finally 1 Boom"]
    assert marks == ["start after 0/0 clean-ups", "start after 1/1 clean-ups"]


@pytest.mark.parametrize("policy", [ExceptionPolicy.HALT, ExceptionPolicy.QUARANTINE])
async def test_cleanup_completes_before_the_partition_is_given_up(
    redis_url: str, app_name: str, redis_client: redis.Redis, policy: ExceptionPolicy
) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    marks: list[str] = []

    @app.processor(pings, exception_policy=policy, middleware=[GeneratorExitCleanup(marks)])
    async def proc(events):
        async for event in events:
            if event.record.n == 1:
                marks.append("raise 1")
                raise Boom(1)
            marks.append(f"proc {event.record.n}")

    ids = await pings.send(*[Ping(key="k", n=i) for i in range(3)])
    async with Running(app) as running:
        if policy is ExceptionPolicy.HALT:
            assert await running.exit_code() == 1
        else:
            await running.until(lambda: "raise 1" in marks, "the failure")
            assert await running.stop() == 0
    assert marks == ["proc 0", "raise 1", "exit 1 Boom"]
    assert ids[1] in pending_ids(redis_client, pings.partitions[0].key, "proc")


async def test_middleware_close_on_graceful_stop_sees_no_exception(
    redis_url: str, app_name: str
) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    marks: list[str] = []
    release = asyncio.Event()

    class Watch(Middleware):
        async def handler(self, parent, **kwargs):
            context = kwargs["context"]
            try:
                async for event in parent:
                    yield event
            finally:
                marks.append(f"closed exception={context.exception!r}")

    @app.processor(pings, middleware=[Watch()])
    async def proc(events):
        async for event in events:
            marks.append(f"proc {event.record.n}")
            if event.record.n == 0:
                await release.wait()

    await pings.send(*[Ping(key="k", n=i) for i in range(2)])
    async with Running(app) as running:
        await running.until(lambda: "proc 0" in marks, "the first event")
        running.worker.stop()
        release.set()
        assert await running.exit_code() == 0
    assert marks == ["proc 0", "closed exception=None"]
