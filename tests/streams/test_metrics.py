"""Prometheus metrics of an in-process worker, scraped over HTTP from ``/metrics``.

Counters are flushed into Prometheus every second and lag/pending sampled every few
seconds, so each check polls the endpoint until the value is there (hang guard only).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from runnel import Record
from runnel.types import ExceptionPolicy
from tests.support.apps import HANG_GUARD, Running, make_app
from tests.support.metrics_scrape import Samples, present, scrape, total
from tests.support.ports import free_port

PARTITIONS = 4
EVENTS = 200
POISON = 13


class Ping(Record):
    key: str
    n: int


async def scraped_until(port: int, check: Any, what: str) -> Samples:
    """Scrape (off the event loop, so the worker keeps flushing) until ``check`` holds."""
    samples: Samples = []
    try:
        async with asyncio.timeout(HANG_GUARD):
            while True:
                samples = await asyncio.to_thread(scrape, port)
                if samples and check(samples):
                    return samples
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(f"{what} never showed in /metrics: {samples}") from None


async def test_events_jobs_and_ownership_are_counted(redis_url: str, app_name: str) -> None:
    port = free_port()
    app = make_app(
        app_name,
        redis_url,
        metrics_port=port,
        metrics_host="127.0.0.1",
        leadership_poll_interval=200,
        job_backoff_base=0.01,
    )
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=PARTITIONS)

    @app.processor(pings, exception_policy=ExceptionPolicy.IGNORE)
    async def collect(events):  # type: ignore[no-untyped-def]
        async for ping in events.records():
            if ping.n == POISON:
                raise ValueError("poison")

    tries: Counter[str] = Counter()

    @app.job
    async def ok(n: int) -> int:
        return n

    @app.job(retries=2)
    async def flaky() -> None:
        tries["flaky"] += 1
        if tries["flaky"] == 1:
            raise RuntimeError("first try fails")

    @app.job(retries=0)
    async def doomed() -> None:
        raise RuntimeError("always")

    records = [Ping(key=f"k{i % 11}", n=i) for i in range(EVENTS)]
    sent = Counter(pings.partition_number(r) for r in records)
    poisoned = pings.partition_number(records[POISON])
    labels = {"app": app_name, "processor": "collect", "stream": "pings"}

    async with Running(app):
        await pings.send(*records)
        for n in range(3):
            await ok.delay(n)
        await flaky.delay()
        await doomed.delay()

        def counted(s: Samples) -> bool:
            return (
                all(
                    total(s, "runnel_acks_sent_total", partition=p, **labels) == n
                    for p, n in sent.items()
                )
                and total(s, "runnel_jobs_succeeded_total", job="flaky") == 1
            )

        samples = await scraped_until(port, counted, "every event and job")
        for partition, count in sent.items():
            where = {**labels, "partition": partition}
            assert total(samples, "runnel_events_processed_total", **where) == count
            failed = 1 if partition == poisoned else 0
            assert total(samples, "runnel_events_failed_total", **where) == failed
            assert total(samples, "runnel_events_redelivered_total", **where) == 0
        assert total(samples, "runnel_partitions_owned", **labels) == PARTITIONS
        assert total(samples, "runnel_rebalances_total", **labels) >= 1
        sampled = total(samples, "runnel_event_processing_seconds_count", **labels)
        assert 0 < sampled <= EVENTS
        assert total(samples, "runnel_event_processing_seconds_bucket", le="+Inf") == sampled

        job = {"app": app_name}
        assert total(samples, "runnel_jobs_enqueued_total", job="ok", **job) == 3
        assert total(samples, "runnel_jobs_started_total", job="ok", **job) == 3
        assert total(samples, "runnel_jobs_succeeded_total", job="ok", **job) == 3
        assert total(samples, "runnel_jobs_started_total", job="flaky", **job) == 2
        assert total(samples, "runnel_jobs_retried_total", job="flaky", **job) == 1
        assert total(samples, "runnel_jobs_dead_total", job="doomed", **job) == 1
        assert total(samples, "runnel_jobs_retried_total", job="doomed", **job) == 0
        assert total(samples, "runnel_job_run_seconds_count", job="ok", **job) == 3

        # The leader, and the samplers' gauges once they have run on the drained state.
        def settled(s: Samples) -> bool:
            lags = [
                v
                for name, got, v in s
                if name == "runnel_partition_lag" and got.get("processor") == "collect"
            ]
            return (
                total(s, "runnel_leader", app=app_name) == 1
                and len(lags) == PARTITIONS
                and not any(lags)
                and present(s, "runnel_jobs_queued")
                and total(s, "runnel_jobs_dead_letters", app=app_name) == 1
            )

        samples = await scraped_until(port, settled, "the leader, lag and queue gauges")
        assert total(samples, "runnel_partition_pending", **labels) == 0
        assert total(samples, "runnel_jobs_queued", app=app_name) == 0
    # Stopped: nothing is served any more.
    assert await asyncio.to_thread(scrape, port) == []


async def test_cancelled_jobs_are_counted(redis_url: str, app_name: str) -> None:
    """A job cancelled while it ran here counts in runnel_jobs_cancelled_total, with its
    queue; every cancelled job kept, in the runnel_jobs_cancelled_kept gauge (per app)."""
    port = free_port()
    app = make_app(app_name, redis_url, metrics_port=port, metrics_host="127.0.0.1")
    started = asyncio.Event()

    @app.job(queue="emails")
    async def hold() -> None:
        started.set()
        await asyncio.Event().wait()  # until cancelled

    async with Running(app):
        running = await hold.delay()
        later = await hold.delay(countdown=3600)
        async with asyncio.timeout(HANG_GUARD):
            await started.wait()
        assert await running.cancel()
        assert await later.cancel()

        def counted(s: Samples) -> bool:
            return (
                total(s, "runnel_jobs_cancelled_total", job="hold", queue="emails", app=app_name)
                == 1
                and total(s, "runnel_jobs_cancelled_kept", app=app_name) == 2
            )

        samples = await scraped_until(port, counted, "the cancelled jobs")
        assert total(samples, "runnel_jobs_started_total", job="hold", app=app_name) == 1
        assert total(samples, "runnel_jobs_succeeded_total", job="hold", app=app_name) == 0


async def test_a_quarantined_partition_is_flagged(redis_url: str, app_name: str) -> None:
    """runnel_partition_quarantined is 1 for the partition stopped on a failing event and
    0 for the others; back to 0 once the quarantine is lifted."""
    port = free_port()
    app = make_app(app_name, redis_url, metrics_port=port, metrics_host="127.0.0.1")
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=PARTITIONS)
    healed = False

    @app.processor(pings, exception_policy=ExceptionPolicy.QUARANTINE)
    async def collect(events):  # type: ignore[no-untyped-def]
        async for ping in events.records():
            if ping.n == POISON and not healed:
                raise ValueError("poison")

    poison = Ping(key="k", n=POISON)
    stopped = str(pings.partition_number(poison))
    labels = {"app": app_name, "processor": "collect", "stream": "pings"}

    def flags(s: Samples) -> dict[str, float]:
        return {
            got["partition"]: v
            for name, got, v in s
            if name == "runnel_partition_quarantined" and got.get("app") == app_name
        }

    async with Running(app) as running:
        await pings.send(poison)
        others = dict.fromkeys((str(p) for p in range(PARTITIONS) if str(p) != stopped), 0.0)
        samples = await scraped_until(
            port, lambda s: flags(s) == {**others, stopped: 1.0}, "the quarantine"
        )
        assert total(samples, "runnel_events_failed_total", partition=stopped, **labels) == 1
        healed = True
        await running.worker.executors[0].coordination.lift(None, "test")
        await scraped_until(
            port, lambda s: flags(s) == {**others, stopped: 0.0}, "the lifted quarantine"
        )


async def test_no_port_no_metrics(redis_url: str, app_name: str) -> None:
    """Off by default: no endpoint, no flusher; the counters still add up in memory."""
    app = make_app(app_name, redis_url)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    done = asyncio.Event()
    seen = 0

    @app.processor(pings)
    async def collect(events):  # type: ignore[no-untyped-def]
        nonlocal seen
        async for _ in events.records():
            seen += 1
            if seen == 10:
                done.set()

    async with Running(app) as running:
        assert running.worker.metrics is None
        await pings.send(*[Ping(key=f"k{i}", n=i) for i in range(10)])
        async with asyncio.timeout(HANG_GUARD):
            await done.wait()
        stats = running.worker.executors[0].stats
        assert stats.sample_every == 0
        assert not any(stats.timings.counts)


async def test_records_sent_again_are_counted_as_duplicates(redis_url: str, app_name: str) -> None:
    """A record sent again by its key is not appended: the sending process counts it in
    runnel_duplicates_dropped_total, per app and stream."""
    port = free_port()
    app = make_app(app_name, redis_url, metrics_port=port, metrics_host="127.0.0.1")
    orders = app.stream(
        "orders", record=Ping, partition_by="key", partition_count=2, idempotency_key="key"
    )

    @app.processor(orders)
    async def read(events):  # type: ignore[no-untyped-def]
        async for _ in events:
            pass

    async with Running(app):
        await orders.send(Ping(key="a", n=1), Ping(key="b", n=2))
        again = await orders.send(Ping(key="a", n=1), Ping(key="b", n=2), Ping(key="c", n=3))
        assert again.duplicates == 2
        where = {"app": app_name, "stream": "orders"}

        def counted(s: Samples) -> bool:
            return total(s, "runnel_duplicates_dropped_total", **where) == 2

        await scraped_until(port, counted, "the duplicates")
