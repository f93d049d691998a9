"""Runnel's side of each benchmark, as it runs inside its own process (see worker_proc)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import APP, PARTITIONS, Ping, Stamped
from benchmarks.tally import Tally, now, paced, percentiles, timed_batches
from runnel import App
from runnel.runtime.worker import Worker


def tracing(mode: str) -> None:
    """runnel-otel as the tracing benchmark wants it: ``absent`` (unregistered, as if not
    installed), ``idle`` (installed, no tracer provider) or ``on`` (spans made and dropped)."""
    from runnel.plugins import manager

    if mode == "absent":
        manager.plugin_manager().unregister(name="otel")
        manager.generation += 1
    elif mode == "on":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        import runnel_otel

        class Drop(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Drop()))
        runnel_otel.instrument(provider)


def _app(url: str, **settings: Any) -> App:
    return App(name=APP, redis_url=url, **settings)


def gate() -> asyncio.Event:
    """Set on SIGUSR1: a gated drain processes nothing before the harness releases it (so
    that joining and filling are over before the measured window starts)."""
    released = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, released.set)
    return released


async def drain(
    url: str,
    stream: str,
    group: str,
    batch: int,
    metrics_port: int | None = None,
    gated: bool = False,
    defaults: bool = False,
    prefetch: int | None = None,
) -> dict[str, Any]:
    """One worker with an empty processor, per event (batch 1) or ``take(batch)``, until
    SIGTERM. No join delay unless ``defaults``: the worker is measured, not its start-up.
    ``metrics_port`` turns Prometheus metrics on (served on 127.0.0.1); ``gated`` holds
    the first event until SIGUSR1; ``prefetch`` sets ``default_prefetch_count``."""
    settings: dict[str, Any] = {} if defaults else {"default_join_delay": 0}
    if prefetch:
        settings["default_prefetch_count"] = prefetch
    app = _app(url, metrics_port=metrics_port, metrics_host="127.0.0.1", **settings)
    pings = app.stream(stream, record=Ping, partition_by="key", partition_count=PARTITIONS)
    tally = Tally()
    released = gate() if gated else None

    @app.processor(pings, name=group)
    async def empty(events):  # type: ignore[no-untyped-def]
        if batch == 1:
            async for _ in events.records():
                if released is not None and not tally.count:
                    await released.wait()
                tally.add(1)
        else:
            async for records in events.take(batch, within=0.01).records():
                if released is not None and not tally.count:
                    await released.wait()
                tally.add(len(records))

    code = await Worker(app).run()  # returns on SIGTERM, after a graceful stop
    return {**tally.result(), "exit_code": code}


async def count(
    url: str, stream: str, group: str, batch: int, window: float | None = None
) -> dict[str, Any]:
    """Count per key in a table, per event (batch 1) or ``take(batch)``, until SIGTERM;
    with ``window``, per tumbling window of that many seconds (of the entries' time)."""
    app = _app(url, default_join_delay=0)
    pings = app.stream(stream, record=Ping, partition_by="key", partition_count=PARTITIONS)
    counts: Any = app.table(f"counts-{group}", source=pings, default=0)
    if window:
        counts = counts.tumbling(window, expires=3600)
    tally = Tally()

    @app.processor(pings, name=group)
    async def tally_counts(events):  # type: ignore[no-untyped-def]
        if batch == 1:
            async for record in events.records():
                counts[record.key] += 1
                tally.add(1)
        else:
            async for records in events.take(batch, within=0.01).records():
                for record in records:
                    counts[record.key] += 1
                tally.add(len(records))

    code = await Worker(app).run()
    return {**tally.result(), "exit_code": code}


async def takeover(url: str, stream: str, group: str) -> dict[str, Any]:
    """Join as the next owner of a counting table's partitions (the previous owner has
    stopped); report when partition 0 was assigned to us (its lock just taken) and when
    its first event was processed, with the count read there (from the store)."""
    app = _app(url, default_join_delay=0)
    pings = app.stream(stream, record=Ping, partition_by="key", partition_count=PARTITIONS)
    counts = app.table(f"counts-{group}", source=pings, default=0)
    times: dict[str, float] = {}
    seen: list[int] = []

    @app.processor(pings, name=group)
    async def tally_counts(events):  # type: ignore[no-untyped-def]
        async for record in events.records():
            found = counts[record.key]
            counts[record.key] = found + 1
            if not seen:
                times["first"] = now()
                seen.append(found)
                worker.stop()

    def assigned(partition, inbox):  # type: ignore[no-untyped-def]
        if partition.number == 0:
            times.setdefault("assigned", now())
        return new_consumer(partition, inbox)

    worker = Worker(app)
    runner = worker.executors[0].runner
    new_consumer = runner.new_consumer
    runner.new_consumer = assigned
    code = await worker.run()
    return {**times, "count_read": seen[0] if seen else None, "exit_code": code}


async def send(
    url: str, stream: str, total: int, batch: int, identities: bool = True
) -> dict[str, Any]:
    """``stream.send(*records)`` in batches; the records are made before timing. Each
    send carries its call's identity unless ``identities`` is False."""
    app = _app(url, idempotent_sends=identities)
    pings = app.stream(stream, record=Ping, partition_by="key", partition_count=PARTITIONS)
    records = [Ping(key=f"k{i}", n=i) for i in range(batch)]
    result = await timed_batches(lambda: pings.send(*records), total, batch)
    await app.aclose()
    return result


async def send_both(url: str, stream: str, total: int, batch: int) -> dict[str, Any]:
    """``stream.send(*records)`` in batches, each send with its call's identity and one
    without (``idempotent_sends=False``) in turn, to two streams, each send timed: the
    two rates from one process and one stretch of time, so that the machine's slow
    spells hit both alike. ``total`` events each."""
    records = [Ping(key=f"k{i}", n=i) for i in range(batch)]
    sides = {}
    for name, identities in (("with", True), ("without", False)):
        app = _app(url, idempotent_sends=identities)
        pings = app.stream(
            f"{stream}-{name}", record=Ping, partition_by="key", partition_count=PARTITIONS
        )
        await pings.send(*records)  # connected, the script loaded
        sides[name] = (app, pings)
    spent = dict.fromkeys(sides, 0.0)
    for n in range(total // batch):
        order = list(sides) if n % 2 else list(reversed(sides))
        for name in order:
            start = now()
            await sides[name][1].send(*records)
            spent[name] += now() - start
    for app, _ in sides.values():
        await app.aclose()
    events = total // batch * batch
    return {"events": events, "seconds": spent["with"], "seconds_without": spent["without"]}


async def latency(
    url: str, stream: str, group: str, warmup: int, ready: Callable[[], None]
) -> dict[str, Any]:
    """A worker with default settings recording send -> processor latency per event (the
    first ``warmup`` events are left out); calls ``ready`` once it owns every partition."""
    app = _app(url)
    stamps = app.stream(stream, record=Stamped, partition_by="key", partition_count=PARTITIONS)
    latencies: list[float] = []

    @app.processor(stamps, name=group)
    async def measure(events):  # type: ignore[no-untyped-def]
        async for record in events.records():
            if record.n >= warmup:
                latencies.append(time.time() - record.sent)

    worker = Worker(app)
    running = asyncio.create_task(worker.run())
    # Ready once it owns every partition (the runner's own state: there is no event for it).
    runner = worker.executors[0].runner
    while len(runner.owned) < PARTITIONS and not running.done():  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    ready()
    await running
    s = app.settings
    settings = {
        "read_timeout_ms": s.default_read_timeout,
        "prefetch_count": s.default_prefetch_count,
        "join_delay_s": s.default_join_delay,
    }
    return {**percentiles(latencies), "settings": settings}


async def produce(
    url: str, stream: str, rate: int, per_tick: int, seconds: float
) -> dict[str, Any]:
    """``per_tick`` stamped records per ``stream.send`` on a fixed schedule."""
    app = _app(url)
    stamps = app.stream(stream, record=Stamped, partition_by="key", partition_count=PARTITIONS)
    await stamps.send(Stamped(key="warm", n=-1, sent=time.time()))  # connect first
    start, n = now(), 0
    async for _ in paced(rate, per_tick, seconds):
        sent = time.time()
        await stamps.send(*(Stamped(key=f"k{i}", n=i, sent=sent) for i in range(n, n + per_tick)))
        n += per_tick
    elapsed = now() - start
    await app.aclose()
    return {"events": n, "seconds": elapsed}
