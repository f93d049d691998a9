"""ExceptionPolicy.RETRY: in place, in order, with backoff, then the fallback policy; and
failure lines that name processor, stream, partition, entry id and key."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
import redis

from runnel import ExceptionPolicy, Record
from runnel.middleware.dead_letter import DeadLetterMiddleware
from tests.support.apps import Running, make_app, pending_ids


class Ping(Record):
    key: str
    n: int


class Boom(Exception):
    pass


def declare(app_name: str, redis_url: str, fails: dict[int, int], log: list, **options):
    """One partition; event ``n`` fails ``fails[n]`` times (-1: always) before it succeeds.

    ``log`` gets ("try", n) for every attempt and ("done", n) for every success."""
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    middleware = [DeadLetterMiddleware(pings)] if options.pop("dead_letters", False) else []

    @app.processor(
        pings,
        name="proc",
        exception_policy=ExceptionPolicy.RETRY,
        middleware=middleware,
        retry_backoff=0.001,
        **options,
    )
    async def proc(events):
        async for ping in events.records():
            log.append(("try", ping.n))
            left = fails.get(ping.n, 0)
            if left:
                fails[ping.n] = left - 1
                raise Boom(f"failing on {ping.n}")
            log.append(("done", ping.n))

    return app, pings


async def test_a_failing_event_is_retried_in_place_then_goes_on_in_order(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    log: list = []
    app, pings = declare(app_name, redis_url, {2: 3, 4: 1}, log, retries=3)
    await pings.send(*[Ping(key="k", n=i) for i in range(7)])
    async with Running(app) as running:
        await running.until(lambda: ("done", 6) in log, "every event")
        assert await running.stop() == 0
    assert [n for what, n in log if what == "done"] == list(range(7)), "each once, in order"
    tries = [n for what, n in log if what == "try"]
    assert tries == [0, 1, 2, 2, 2, 2, 3, 4, 4, 5, 6], "nothing after a failing event meanwhile"
    assert pending_ids(redis_client, pings.partitions[0].key, "proc") == []


async def test_batches_are_retried_whole(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    batches: list[list[int]] = []
    failed = []

    @app.processor(pings, name="proc", exception_policy="retry", retries=2, retry_backoff=0.001)
    async def proc(events):
        async for batch in events.take(3, within=5).records():
            if not failed:
                failed.append([p.n for p in batch])
                raise Boom("first batch")
            batches.append([p.n for p in batch])

    await pings.send(*[Ping(key="k", n=i) for i in range(6)])
    async with Running(app) as running:
        await running.until(lambda: sum(map(len, batches)) == 6, "every event")
        assert await running.stop() == 0
    assert failed == [[0, 1, 2]]
    assert [n for batch in batches for n in batch] == list(range(6))
    assert batches[0][:3] == [0, 1, 2]
    assert pending_ids(redis_client, pings.partitions[0].key, "proc") == []


async def test_fallback_halt_stops_the_worker_and_keeps_the_event(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    log: list = []
    app, pings = declare(app_name, redis_url, {1: -1}, log, retries=2, fallback="halt")
    ids = await pings.send(*[Ping(key="k", n=i) for i in range(3)])
    async with Running(app) as running:
        assert await running.exit_code() == 1
    assert log == [("try", 0), ("done", 0), ("try", 1), ("try", 1), ("try", 1)]
    assert pending_ids(redis_client, pings.partitions[0].key, "proc")[0] == ids[1]


async def test_fallback_quarantine_holds_the_partition_and_records_it(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    log: list = []
    app, pings = declare(app_name, redis_url, {1: -1}, log, retries=1, fallback="quarantine")
    ids = await pings.send(*[Ping(key="k", n=i) for i in range(3)])
    async with Running(app) as running:
        await running.until(lambda: any(c.poisoned for c in running.consumers()), "quarantine")
        quarantined = await app.store.coordination(app.name, "pings", "proc").quarantined()
        assert not running.done
        assert await running.stop() == 0
    assert log == [("try", 0), ("done", 0), ("try", 1), ("try", 1)]
    [(partition, quarantine)] = quarantined.items()
    assert partition == pings.partitions[0].id
    assert quarantine.id == ids[1].decode()
    assert "failing on 1" in quarantine.error
    assert pending_ids(redis_client, pings.partitions[0].key, "proc")[0] == ids[1]


async def test_fallback_ignore_sends_it_to_the_dead_letters_and_goes_on(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    log: list = []
    app, pings = declare(
        app_name, redis_url, {1: -1}, log, retries=2, fallback="ignore", dead_letters=True
    )
    ids = await pings.send(*[Ping(key="k", n=i) for i in range(3)])
    async with Running(app) as running:
        await running.until(lambda: ("done", 2) in log, "the event after the failing one")
        assert await running.stop() == 0
    assert [n for what, n in log if what == "try"] == [0, 1, 1, 1, 2]
    dead = redis_client.xrange(f"__strm:{app_name}.dead.pings.0")
    assert [fields[b"xid"] for _, fields in dead] == [ids[1]]
    assert pending_ids(redis_client, pings.partitions[0].key, "proc") == []


async def test_a_stop_during_the_backoff_leaves_the_event_unacknowledged(
    redis_url: str, app_name: str, redis_client: redis.Redis
) -> None:
    log: list = []
    # A backoff far longer than the hang guard: only waking early lets the stop finish.
    app, pings = declare(app_name, redis_url, {1: -1}, log, retries=5)
    app.processors["proc"].retry_backoff = 3600
    ids = await pings.send(*[Ping(key="k", n=i) for i in range(3)])
    async with Running(app) as running:
        await running.until(lambda: ("try", 1) in log, "the failure")
        assert await running.stop() == 0
    assert log == [("try", 0), ("done", 0), ("try", 1)]
    assert pending_ids(redis_client, pings.partitions[0].key, "proc") in ([ids[1]], ids[1:])


async def test_failure_lines_name_processor_stream_partition_entry_and_key(
    redis_url: str, app_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="runnel")
    log: list = []
    app, pings = declare(app_name, redis_url, {1: -1}, log, retries=1, fallback="ignore")
    ids = await pings.send(*[Ping(key="alice", n=i) for i in range(3)])
    async with Running(app) as running:
        await running.until(lambda: ("done", 2) in log, "the event after the failing one")
        assert await running.stop() == 0
    failures = [r for r in caplog.records if getattr(r, "entry_id", None)]
    assert [r.levelname for r in failures] == ["WARNING", "ERROR"]  # the retry, the give-up
    for record in failures:
        assert (record.processor, record.stream, record.partition) == ("proc", "pings", 0)
        assert (record.entry_id, record.key) == (ids[1].decode(), "alice")
        text = record.getMessage()
        assert f"processor 'proc' on stream pings partition 0 entry {ids[1].decode()}" in text
        assert "(key 'alice')" in text


async def test_giving_up_reads_as_a_sentence_and_the_dead_letters_take_it(
    redis_url: str, app_name: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """RETRY falling back to IGNORE with DeadLetterMiddleware: no warning that it would not
    forward (it does), a give-up line that says how often it failed, then the forward."""
    caplog.set_level(logging.WARNING, logger="runnel")
    log: list = []
    app, pings = declare(
        app_name, redis_url, {1: -1}, log, retries=2, fallback="ignore", dead_letters=True
    )
    ids = await pings.send(*[Ping(key="alice", n=i) for i in range(3)])
    async with Running(app) as running:
        await running.until(lambda: ("done", 2) in log, "the event after the failing one")
        assert await running.stop() == 0
    where = f"processor 'proc' on stream pings partition 0 entry {ids[1].decode()} (key 'alice')"
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [line for line in said if "DeadLetterMiddleware" in line], said
    assert [line for line in said if line.startswith(where)] == [
        f"{where} raised Boom('failing on 1'); retry 1 of 2 in 0.00s",
        f"{where} raised Boom('failing on 1'); retry 2 of 2 in 0.00s",
        f"{where} failed 3 times in a row; ignoring it and going on",
    ]
    assert "forwarded 1 failed event to dead.pings" in said
    dead = redis_client.xrange(f"__strm:{app_name}.dead.pings.0")
    assert [fields[b"xid"] for _, fields in dead] == [ids[1]]


async def test_an_undecodable_event_is_named_without_a_key(
    redis_url: str, app_name: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="runnel")
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    seen: list[int] = []

    @app.processor(pings, name="proc", exception_policy="ignore")
    async def proc(events):
        async for ping in events.records():
            seen.append(ping.n)

    key = pings.partitions[0].key
    bad = redis_client.xadd(key, {"data": b"not json"})
    redis_client.xadd(key, {"data": json.dumps({"key": "k", "n": 1})})
    async with Running(app) as running:
        await running.until(lambda: seen == [1], "the good event")
        assert await running.stop() == 0
    (record,) = [r for r in caplog.records if getattr(r, "entry_id", None)]
    assert record.entry_id == bad.decode() and not hasattr(record, "key")
    assert f"partition 0 entry {bad.decode()} raised" in record.getMessage()


async def test_the_stop_wakes_no_other_partition(redis_url: str, app_name: str) -> None:
    """While one partition backs off, the others go on."""
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    done: list[str] = []

    @app.processor(pings, name="proc", exception_policy="retry", retries=100, retry_backoff=3600)
    async def proc(events):
        async for ping in events.records():
            if ping.n < 0:
                raise Boom("stuck")
            done.append(ping.key)

    stuck, free = (
        "a",
        next(
            k
            for k in "bcdefgh"
            if pings.partition_number(Ping(key=k, n=0))
            != pings.partition_number(Ping(key="a", n=0))
        ),
    )
    await pings.send(Ping(key=stuck, n=-1), Ping(key=stuck, n=1))
    async with Running(app) as running:
        await asyncio.sleep(0)
        await pings.send(*[Ping(key=free, n=i) for i in range(5)])
        await running.until(lambda: done.count(free) == 5, "the other partition")
        assert stuck not in done
        assert await running.stop() == 0
