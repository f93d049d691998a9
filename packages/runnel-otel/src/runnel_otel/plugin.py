"""The runnel-otel plugin: Runnel's instrumentation hooks, answered only when tracing is on
(otherwise each returns None at once, and Runnel goes its untraced way). The span code,
and OpenTelemetry with it, is imported only once tracing is on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runnel.plugins import hookimpl
from runnel_otel.config import tracer

if TYPE_CHECKING:
    from types import ModuleType

    from runnel.interfaces import Middleware
    from runnel.jobs.model import Delivery
    from runnel.plugins.hookspecs import (
        EnqueueDone,
        QueuedJob,
        RunDone,
        SendDone,
        SentStream,
        StreamProcessor,
    )
    from runnel.store.log import PartitionId


def _spans() -> ModuleType:
    from runnel_otel import spans

    return spans


@hookimpl
def runnel_processor_middleware(processor: StreamProcessor) -> Middleware | None:
    found = tracer()
    return None if found is None else _spans().middleware_for(found, processor)


@hookimpl
def runnel_sending(
    stream: SentStream, entries: list[tuple[PartitionId, dict[bytes, Any]]]
) -> SendDone | None:
    found = tracer()
    return None if found is None else _spans().start_send(found, stream, entries)


@hookimpl
def runnel_enqueuing(job: QueuedJob, job_id: str, headers: dict[str, str]) -> EnqueueDone | None:
    found = tracer()
    return None if found is None else _spans().start_enqueue(found, job, job_id, headers)


@hookimpl
def runnel_job_running(
    job: QueuedJob, delivery: Delivery, headers: dict[str, str]
) -> RunDone | None:
    found = tracer()
    return None if found is None else _spans().start_run(found, job, delivery, headers)
