"""A trace that crosses processes: a producer process sends an event and enqueues a job,
`runnel jobs send` enqueues another, and a real `runnel worker` process handles them all;
each exports its spans over OTLP/HTTP to a receiver the test runs, configured only by the
standard OTEL_* variables."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import redis
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.support.processes import WorkerProcess, cli, env_with, wait_for

APP = """
import os

import redis

from runnel import App, Record

app = App(name={app_name!r})


class Order(Record):
    key: str
    n: int


orders = app.stream("orders", record=Order, partition_by="key", partition_count=2)
seen = redis.Redis.from_url(os.environ["TEST_RECORD_URL"])


@app.processor(orders, name="proc")
async def proc(events):
    async for order in events.records():
        seen.rpush("seen", f"order {{order.n}}")


@app.job
async def resize(n: int) -> int:
    seen.rpush("seen", f"job {{n}}")
    return n


async def produce():
    await orders.send(Order(key="a", n=1))
    await resize.delay(2)
"""


@dataclass
class Received:
    service: str
    span: Span


class Receiver:
    """An OTLP/HTTP trace receiver: POST /v1/traces, protobuf; keeps every span."""

    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.paths.append(self.path)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource_spans in request.resource_spans:
                    service = next(
                        a.value.string_value
                        for a in resource_spans.resource.attributes
                        if a.key == "service.name"
                    )
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            receiver.spans.append(Received(service, span))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def named(self, name: str) -> list[Received]:
        return [r for r in self.spans if r.span.name == name]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    found.thread.start()
    try:
        yield found
    finally:
        found.server.shutdown()
        found.server.server_close()


def test_the_worker_continues_the_producers_trace(
    tmp_path: Path, redis_url: str, app_name: str, redis_client: redis.Redis, receiver: Receiver
) -> None:
    (tmp_path / "tracedapp.py").write_text(textwrap.dedent(APP.format(app_name=app_name)))
    otel = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "TEST_RECORD_URL": redis_url,
    }
    produced = subprocess.run(
        [sys.executable, "-c", "import asyncio, tracedapp; asyncio.run(tracedapp.produce())"],
        cwd=tmp_path,
        env=env_with(redis_url, OTEL_SERVICE_NAME="producer", **otel),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert produced.returncode == 0, produced.stderr
    sent = cli(
        "jobs",
        "send",
        "tracedapp:resize",
        "[3]",
        cwd=tmp_path,
        env=env_with(redis_url, OTEL_SERVICE_NAME="cli", **otel),
    )
    assert sent.returncode == 0, sent.stderr
    with WorkerProcess(
        "tracedapp:app", tmp_path, env_with(redis_url, OTEL_SERVICE_NAME="worker", **otel)
    ) as worker:
        wait_for(lambda: len(redis_client.lrange("seen", 0, -1)) == 3)
        assert worker.stop() == 0, worker.output
    wait_for(lambda: len(receiver.named("process resize")) == 2)
    wait_for(lambda: receiver.named(f"process {app_name}.orders"))

    assert set(receiver.paths) == {"/v1/traces"}
    [sent_event] = receiver.named(f"send {app_name}.orders")
    [processed_event] = receiver.named(f"process {app_name}.orders")
    pairs = [(sent_event, processed_event)]
    runs = {r.span.trace_id: r for r in receiver.named("process resize")}
    for enqueued in receiver.named("send resize"):  # by delay() and by `runnel jobs send`
        pairs.append((enqueued, runs[enqueued.span.trace_id]))
    assert sorted(sent.service for sent, _ in pairs) == ["cli", "producer", "producer"]
    for sent_span, processed in pairs:
        assert processed.service == "worker"
        assert sent_span.span.kind == Span.SPAN_KIND_PRODUCER
        assert processed.span.kind == Span.SPAN_KIND_CONSUMER
        assert processed.span.trace_id == sent_span.span.trace_id
        assert processed.span.parent_span_id == sent_span.span.span_id
