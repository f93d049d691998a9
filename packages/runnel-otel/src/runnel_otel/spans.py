"""The spans: sending to a stream, processing an event or a batch, enqueuing and running
a job. Attribute names follow OpenTelemetry's messaging conventions; Runnel's own are
under ``runnel.``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from runnel.interfaces import Middleware
from runnel_otel.carriers import from_fields, inject_fields, link_of

if TYPE_CHECKING:
    from runnel.jobs.model import Delivery, Outcome
    from runnel.plugins.hookspecs import QueuedJob, SentStream, StreamProcessor
    from runnel.types import Event

SYSTEM = "runnel"


def _base(operation: str, destination: str) -> dict[str, Any]:
    return {
        "messaging.system": SYSTEM,
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
        "messaging.destination.name": destination,
    }


def _failed(span: trace.Span, error: BaseException) -> None:
    span.record_exception(error)
    span.set_attribute("error.type", type(error).__name__)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


# Streams.


def start_send(tracer: trace.Tracer, stream: SentStream, entries: list[Any]) -> Any:
    """A PRODUCER span over ``stream.send``; its context goes in every entry."""
    attributes = _base("send", stream.id)
    partitions = {key.number for key, _ in entries}
    if len(partitions) == 1:
        attributes["messaging.destination.partition.id"] = str(partitions.pop())
    if len(entries) != 1:
        attributes["messaging.batch.message_count"] = len(entries)
    span = tracer.start_span(f"send {stream.id}", kind=SpanKind.PRODUCER, attributes=attributes)
    if not stream.record.is_primitive():  # a primitive entry's fields are its record's
        ctx = trace.set_span_in_context(span)
        for _, fields in entries:
            inject_fields(fields, ctx)

    def done(ids: list[bytes] | None, error: BaseException | None) -> None:
        if error is not None:
            _failed(span, error)
        elif ids is not None and len(ids) == 1:
            span.set_attribute("messaging.message.id", _text(ids[0]))
        span.end()

    return done


class TracingMiddleware(Middleware):
    """One CONSUMER span per event (or per ``take()`` batch, linking its events' senders),
    current while the processor handles it, so what the processor sends is its child."""

    def __init__(self, tracer: trace.Tracer, processor: StreamProcessor) -> None:
        self.tracer = tracer
        self.group = processor.name
        self.destination = processor.stream.id
        self.failures: dict[int, tuple[bytes, int]] = {}
        """Per partition, under RETRY: the event that failed and how often in a row."""

    async def handler(self, parent: AsyncIterator[Any], **kwargs: Any) -> AsyncIterator[Any]:
        context = kwargs["context"]
        partition = kwargs["partition"]
        number = partition.number
        for_partition = {
            **_base("process", self.destination),
            "messaging.destination.partition.id": str(number),
            "messaging.consumer.group.name": self.group,
        }
        async for item in parent:
            span = self._start(item, for_partition, number)
            token = otel_context.attach(trace.set_span_in_context(span))
            try:
                yield item
            except GeneratorExit:
                error = context.exception
                if isinstance(error, Exception):
                    _failed(span, error)
                    policy = str(getattr(context.policy, "value", context.policy))
                    span.set_attribute("runnel.exception_policy", policy)
                    head = _head(item)
                    if policy == "retry" and head is not None:
                        failed = self.failures.get(number)
                        count = failed[1] + 1 if failed and failed[0] == head.xid else 1
                        self.failures[number] = (head.xid, count)
                raise
            finally:
                otel_context.detach(token)
                span.end()
            self.failures.pop(number, None)

    def _start(self, item: Any, attributes: dict[str, Any], number: int) -> trace.Span:
        head = _head(item)
        attributes = dict(attributes)
        failed = self.failures.get(number)
        attempt = failed[1] + 1 if failed and head is not None and failed[0] == head.xid else 1
        attributes["runnel.attempt"] = attempt
        name = f"process {self.destination}"
        if isinstance(item, list):
            attributes["messaging.batch.message_count"] = len(item)
            attributes["runnel.redelivered"] = any(e.recovering for e in item)
            links = [link for e in item if (link := link_of(e.data)) is not None]
            return self.tracer.start_span(
                name, kind=SpanKind.CONSUMER, attributes=attributes, links=links
            )
        attributes["messaging.message.id"] = _text(item.xid)
        attributes["runnel.redelivered"] = bool(item.recovering)
        parent = from_fields(item.data)
        return self.tracer.start_span(
            name, context=parent, kind=SpanKind.CONSUMER, attributes=attributes
        )


_middlewares: dict[str, tuple[trace.Tracer, TracingMiddleware]] = {}


def middleware_for(tracer: trace.Tracer, processor: StreamProcessor) -> TracingMiddleware:
    """One per processor and tracer, so retries are counted across restarts of the function."""
    found = _middlewares.get(processor.id)
    if found is None or found[0] is not tracer:
        found = _middlewares[processor.id] = (tracer, TracingMiddleware(tracer, processor))
    return found[1]


# Jobs.


def _job_destination(job: QueuedJob) -> str:
    return f"{job.app.name}.{job.queue}"


def start_enqueue(
    tracer: trace.Tracer, job: QueuedJob, job_id: str, headers: dict[str, str]
) -> Any:
    """A PRODUCER span over ``delay()``; its context goes in the job's headers."""
    attributes = _base("send", _job_destination(job))
    attributes["messaging.message.id"] = job_id
    attributes["runnel.job.name"] = job.name
    span = tracer.start_span(f"send {job.name}", kind=SpanKind.PRODUCER, attributes=attributes)
    from opentelemetry import propagate

    propagate.inject(headers, context=trace.set_span_in_context(span))

    def done(enqueued: bool | None, error: BaseException | None) -> None:
        if error is not None:
            _failed(span, error)
        elif enqueued is False:
            span.set_attribute("runnel.job.existed", True)
        span.end()

    return done


def start_run(tracer: trace.Tracer, job: QueuedJob, d: Delivery, headers: dict[str, str]) -> Any:
    """A CONSUMER span over one try of a job, child of the span that enqueued it."""
    from opentelemetry import propagate

    parent = propagate.extract(headers) if headers else None
    attributes = _base("process", _job_destination(job))
    attributes.update(
        {
            "messaging.message.id": d.id,
            "runnel.job.name": job.name,
            "runnel.job.try": d.tries,
            "runnel.job.retries": d.retries,
        }
    )
    span = tracer.start_span(
        f"process {job.name}", context=parent, kind=SpanKind.CONSUMER, attributes=attributes
    )
    token = otel_context.attach(trace.set_span_in_context(span))

    def done(outcome: Outcome | None, error: BaseException | None) -> None:
        try:
            if error is not None:
                _failed(span, error)
            elif outcome is not None:
                span.set_attribute("runnel.job.outcome", outcome.kind)
                info = outcome.error
                if info is not None:
                    span.add_event(
                        "exception",
                        {
                            "exception.type": info.type,
                            "exception.message": info.message,
                            "exception.stacktrace": info.traceback,
                        },
                    )
                    span.set_attribute("error.type", info.type)
                    span.set_status(Status(StatusCode.ERROR, info.one_line()))
        finally:
            otel_context.detach(token)
            span.end()

    return done


def _head(item: Any) -> Event | None:
    if isinstance(item, list):
        return item[0] if item else None
    return item


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
