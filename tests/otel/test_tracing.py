"""Spans of sends, processing (one event, a take() batch, a retry) and jobs, kept by the
SDK's in-memory exporter, with a real Worker in the test's loop on Redis."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys

import orjson
import redis
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import runnel_otel
from runnel import Record
from runnel.jobs import codec
from runnel.plugins.instruments import plugin_middleware
from tests.support.apps import Running, make_app


class Order(Record):
    key: str
    n: int


class Click(Record, primitive=True):
    key: str
    n: int


class Boom(Exception):
    pass


def named(exporter: InMemorySpanExporter, name: str) -> list:
    return [s for s in exporter.get_finished_spans() if s.name == name]


async def test_a_send_is_the_parent_of_the_processing_of_its_event(
    redis_url: str, app_name: str, redis_client: redis.Redis, spans: InMemorySpanExporter
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="key", partition_count=4)
    seen: list[int] = []

    @app.processor(orders, name="proc")
    async def proc(events):
        async for order in events.records():
            seen.append(order.n)

    [xid] = await orders.send(Order(key="a", n=1))
    number = orders.partition_number(Order(key="a", n=1))
    stored = redis_client.xrange(orders.partitions[number].key)
    assert set(stored[0][1]) == {b"data", b"traceparent"}, "the record's field and the context"
    async with Running(app) as running:
        await running.until(lambda: seen == [1], "the event")
        assert await running.stop() == 0

    [send] = named(spans, f"send {app_name}.orders")
    [process] = named(spans, f"process {app_name}.orders")
    assert send.kind is SpanKind.PRODUCER and process.kind is SpanKind.CONSUMER
    assert process.context.trace_id == send.context.trace_id
    assert process.parent is not None and process.parent.span_id == send.context.span_id
    assert send.attributes["messaging.system"] == "runnel"
    assert send.attributes["messaging.operation.type"] == "send"
    assert send.attributes["messaging.destination.name"] == f"{app_name}.orders"
    assert send.attributes["messaging.destination.partition.id"] == str(number)
    assert send.attributes["messaging.message.id"] == xid.decode()
    assert dict(process.attributes) == {
        "messaging.system": "runnel",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": f"{app_name}.orders",
        "messaging.destination.partition.id": str(number),
        "messaging.consumer.group.name": "proc",
        "messaging.message.id": xid.decode(),
        "runnel.attempt": 1,
        "runnel.redelivered": False,
    }


async def test_a_take_batch_is_one_span_linked_to_the_sends_of_its_events(
    redis_url: str, app_name: str, spans: InMemorySpanExporter
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="key", partition_count=1)
    batches: list[list[int]] = []

    @app.processor(orders, name="proc")
    async def proc(events):
        async for batch in events.take(3, within=5).records():
            batches.append([o.n for o in batch])

    for n in range(3):
        await orders.send(Order(key="a", n=n))
    async with Running(app) as running:
        await running.until(lambda: batches == [[0, 1, 2]], "the batch")
        assert await running.stop() == 0

    sends = named(spans, f"send {app_name}.orders")
    [process] = named(spans, f"process {app_name}.orders")
    assert len(sends) == 3
    assert process.attributes["messaging.batch.message_count"] == 3
    assert process.parent is None, "a batch has many senders: linked, not a child of one"
    linked = {link.context.span_id for link in process.links}
    assert linked == {s.context.span_id for s in sends}


async def test_a_retried_event_shows_its_attempts_and_the_failure(
    redis_url: str, app_name: str, spans: InMemorySpanExporter
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="key", partition_count=1)
    done: list[int] = []

    @app.processor(orders, name="proc", exception_policy="retry", retries=3, retry_backoff=0.001)
    async def proc(events):
        async for order in events.records():
            if len(named(spans, f"process {app_name}.orders")) < 2:
                raise Boom("not yet")
            done.append(order.n)

    [xid] = await orders.send(Order(key="a", n=7))
    async with Running(app) as running:
        await running.until(lambda: done == [7], "the event")
        assert await running.stop() == 0

    tries = named(spans, f"process {app_name}.orders")
    assert [s.attributes["runnel.attempt"] for s in tries] == [1, 2, 3]
    assert {s.attributes["messaging.message.id"] for s in tries} == {xid.decode()}
    for failed in tries[:2]:
        assert failed.status.status_code is StatusCode.ERROR
        assert failed.attributes["error.type"] == "Boom"
        assert failed.attributes["runnel.exception_policy"] == "retry"
        assert [e.name for e in failed.events] == ["exception"]
    assert tries[2].status.status_code is StatusCode.UNSET
    [send] = named(spans, f"send {app_name}.orders")
    assert all(s.parent.span_id == send.context.span_id for s in tries)


async def test_what_a_processor_sends_is_a_child_of_its_processing(
    redis_url: str, app_name: str, spans: InMemorySpanExporter
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="key", partition_count=1)
    copies = app.stream("copies", record=Order, partition_by="key", partition_count=1)
    seen: list[int] = []

    @app.processor(orders, name="proc")
    async def proc(events):
        async for order in events.records():
            await copies.send(order)

    @app.processor(copies, name="copier")
    async def copier(events):
        async for order in events.records():
            seen.append(order.n)

    await orders.send(Order(key="a", n=1))
    async with Running(app) as running:
        await running.until(lambda: seen == [1], "the copy")
        assert await running.stop() == 0

    [first] = named(spans, f"send {app_name}.orders")
    [process] = named(spans, f"process {app_name}.orders")
    [resend] = named(spans, f"send {app_name}.copies")
    [last] = named(spans, f"process {app_name}.copies")
    chain = [first, process, resend, last]
    assert len({s.context.trace_id for s in chain}) == 1, "one trace end to end"
    for parent, child in itertools.pairwise(chain):
        assert child.parent.span_id == parent.context.span_id


async def test_a_job_run_is_a_child_of_its_delay_and_each_try_is_a_span(
    redis_url: str, app_name: str, spans: InMemorySpanExporter
) -> None:
    app = make_app(app_name, redis_url, job_backoff_base=0.001, job_backoff_cap=0.001)
    tries: list[int] = []

    @app.job(retries=2)
    async def resize(n: int) -> int:
        tries.append(n)
        if len(tries) < 2:
            raise Boom("first try")
        return n * 2

    async with Running(app):
        result = await resize.delay(21)
        assert await result.get(timeout=20) == 42

    [send] = named(spans, "send resize")
    runs = named(spans, "process resize")
    assert send.kind is SpanKind.PRODUCER
    assert send.attributes["messaging.message.id"] == result.id
    assert send.attributes["messaging.destination.name"] == f"{app_name}.default"
    assert [r.attributes["runnel.job.try"] for r in runs] == [1, 2]
    for run in runs:
        assert run.kind is SpanKind.CONSUMER
        assert run.context.trace_id == send.context.trace_id
        assert run.parent.span_id == send.context.span_id
        assert run.attributes["messaging.message.id"] == result.id
    assert runs[0].attributes["runnel.job.outcome"] == "retry"
    assert runs[0].status.status_code is StatusCode.ERROR
    assert runs[0].attributes["error.type"] == "Boom"
    [event] = runs[0].events
    assert event.name == "exception" and event.attributes["exception.message"] == "first try"
    assert runs[1].attributes["runnel.job.outcome"] == "success"
    assert runs[1].status.status_code is StatusCode.UNSET


async def test_untraced_and_primitive_entries_keep_their_layout(
    redis_url: str, app_name: str, redis_client: redis.Redis, spans: InMemorySpanExporter
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="key", partition_count=1)
    clicks = app.stream("clicks", record=Click, partition_by="key", partition_count=1)
    await clicks.send(Click(key="a", n=1))
    assert redis_client.xrange(clicks.partitions[0].key)[0][1] == {b"key": b"a", b"n": b"1"}
    assert len(named(spans, f"send {app_name}.clicks")) == 1, "traced, but not stored"

    runnel_otel_off()
    await orders.send(Order(key="a", n=1))
    assert set(redis_client.xrange(orders.partitions[0].key)[0][1]) == {b"data"}
    assert named(spans, f"send {app_name}.orders") == []


def runnel_otel_off() -> None:
    runnel_otel.uninstrument()


async def test_a_traced_job_keeps_the_context_with_its_arguments_only_when_on(
    redis_url: str, app_name: str, redis_client: redis.Redis, spans: InMemorySpanExporter
) -> None:
    app = make_app(app_name, redis_url)

    @app.job
    async def resize(n: int) -> int:
        return n

    traced = await resize.delay(1)
    payload = orjson.loads(redis_client.hget(f"__jobs:{app_name}.job.{traced.id}", "payload"))
    [send] = named(spans, "send resize")
    assert payload["args"] == [1]
    assert payload["headers"]["traceparent"].split("-")[2] == f"{send.context.span_id:016x}"
    assert codec.decode_arguments(resize.serializer, orjson.dumps(payload)) == ([1], {})

    runnel_otel_off()
    plain = await resize.delay(2)
    stored = redis_client.hget(f"__jobs:{app_name}.job.{plain.id}", "payload")
    assert orjson.loads(stored) == {"args": [2]}, "untraced: the payload as before"
    await app.aclose()


async def test_what_a_processor_sends_with_its_commit_carries_its_trace(
    redis_url: str, app_name: str, spans: InMemorySpanExporter
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="key", partition_count=1)
    copies = app.stream("copies", record=Order, partition_by="key", partition_count=1)
    seen: list[int] = []

    @app.processor(orders, name="proc")
    async def proc(events):
        async for order in events.records():
            await events.send(copies, order)

    @app.processor(copies, name="copier")
    async def copier(events):
        async for order in events.records():
            seen.append(order.n)

    await orders.send(Order(key="a", n=1))
    async with Running(app) as running:
        await running.until(lambda: seen == [1], "the copy")
        assert await running.stop() == 0

    [process] = named(spans, f"process {app_name}.orders")
    [resend] = named(spans, f"send {app_name}.copies")
    [last] = named(spans, f"process {app_name}.copies")
    assert resend.parent.span_id == process.context.span_id
    assert last.parent.span_id == resend.context.span_id


async def test_a_redelivered_event_says_so(
    redis_url: str, app_name: str, redis_client: redis.Redis, spans: InMemorySpanExporter
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="key", partition_count=1)
    seen: list[int] = []

    @app.processor(orders, name="proc")
    async def proc(events):
        async for order in events.records():
            seen.append(order.n)

    await orders.send(Order(key="a", n=1))
    # A worker that read the event and died before acknowledging it.
    key = orders.partitions[0].key
    redis_client.xgroup_create(key, "proc", id="0")
    assert redis_client.xreadgroup("proc", "runnel", {key: ">"})
    await orders.send(Order(key="a", n=2))
    async with Running(app) as running:
        await running.until(lambda: seen == [1, 2], "both events")
        assert await running.stop() == 0

    processed = named(spans, f"process {app_name}.orders")
    assert [s.attributes["runnel.redelivered"] for s in processed] == [True, False]


async def test_off_puts_no_middleware_in_front_of_a_processor(
    redis_url: str, app_name: str, spans: InMemorySpanExporter
) -> None:
    app = make_app(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="key", partition_count=1)

    @app.processor(orders, name="proc")
    async def proc(events):
        async for _ in events:
            pass

    assert [type(m).__name__ for m in plugin_middleware(proc)] == ["TracingMiddleware"]
    runnel_otel_off()
    assert plugin_middleware(proc) == []


def test_an_exporter_the_plugin_cannot_set_up_leaves_tracing_off_with_a_warning(
    tmp_path,
) -> None:
    script = (
        "import asyncio\n"
        "from runnel import App, Record\n"
        "class Order(Record):\n"
        "    key: str\n"
        "app = App(name='x', redis_url='memory://')\n"
        "orders = app.stream('orders', record=Order, partition_by='key')\n"
        "asyncio.run(orders.send(Order(key='a')))\n"
        "import runnel_otel\n"
        "print(runnel_otel.tracer())\n"
    )
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "zipkin"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"
    assert (
        "OTEL_TRACES_EXPORTER: runnel-otel sets up only otlp and console, not zipkin; "
        "tracing is off"
    ) in done.stderr


async def test_delay_sync_is_traced_in_the_callers_trace(
    redis_url: str, app_name: str, spans: InMemorySpanExporter
) -> None:
    app = make_app(app_name, redis_url)

    @app.job
    def resize(n: int) -> int:
        return n

    def caller() -> str:
        tracer = runnel_otel.tracer()
        assert tracer is not None
        with tracer.start_as_current_span("view"):
            return resize.delay_sync(3).id

    job_id = await asyncio.to_thread(caller)
    [view] = named(spans, "view")
    [send] = named(spans, "send resize")
    assert send.parent.span_id == view.context.span_id
    assert send.attributes["messaging.message.id"] == job_id
    await app.aclose()
