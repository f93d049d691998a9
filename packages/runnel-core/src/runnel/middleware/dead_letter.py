"""Forwarding events whose processing failed to a dead-letter stream."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from runnel.exceptions import Misconfigured
from runnel.interfaces import Middleware
from runnel.record import Record
from runnel.types import Event, ExceptionPolicy, Partition

if TYPE_CHECKING:
    from runnel.processor import Processor
    from runnel.stream import Stream

log = logging.getLogger("runnel.dead_letter")


@runtime_checkable
class DeclaresStreams(Protocol):
    """An app that can declare the sink next to its source (:meth:`runnel.App.stream`)."""

    def stream(
        self, name: str, record: type[Record], partition_by: Any, partition_count: int | None
    ) -> Stream: ...


class Dead(Record, primitive=True):
    """A failed event of a non-primitive stream, kept as raw bytes (decoding may be what failed)."""

    failed_at: str
    partition: str
    xid: str
    data: bytes
    error: str = ""


def letter_partition(partition: Partition) -> str:
    """The name a dead letter gives its source partition: runnel 0.1's (its Redis key,
    ``__strm:shop.orders.3``) on every store, so that letters read the same on memory://,
    Redis and a Cluster, and 0.1's letters still find their partition."""
    app, stream, number = partition.id
    return f"__strm:{app}.{stream}.{number}"


class DeadLetterMiddleware(Middleware):
    """With ``ExceptionPolicy.IGNORE`` (or ``RETRY`` falling back to it, once the retries
    run out), send events whose processing raised to ``self.sink``.

    The sink is the one-partition stream ``dead.{source}``. A primitive source keeps its
    record type, so dead events are exact copies; any other source gets :class:`Dead`
    entries holding the stored bytes with the partition, id, failure time and error.
    Consume the sink with a processor like any stream, or use ``runnel dead``. If
    forwarding fails the event is not counted as processed: it is tried again.
    """

    def __init__(self, source: Stream) -> None:
        self.source = source
        name = f"dead.{source.name}"
        app = source.app
        if not isinstance(app, DeclaresStreams):
            raise Misconfigured(
                f"a DeadLetterMiddleware's source must belong to an App: {source!r}"
            )
        if source.record.is_primitive():
            self.sink = app.stream(
                name, record=source.record, partition_by=source.partition_by, partition_count=1
            )
        else:
            self.sink = app.stream(name, record=Dead, partition_by="partition", partition_count=1)

    def check_processor(self, processor: Processor) -> None:
        """Warn when nothing would ever be forwarded: events are forwarded when they are
        given up under IGNORE, at once or (under RETRY) once their retries run out."""
        policy = processor.exception_policy
        if policy is ExceptionPolicy.RETRY:
            if processor.fallback is ExceptionPolicy.IGNORE:
                return
            shown = f"RETRY with fallback {processor.fallback.name}"
        elif policy is ExceptionPolicy.IGNORE:
            return
        else:
            shown = policy.name
        log.warning(
            "DeadLetterMiddleware on processor %s forwards nothing: it forwards the events "
            "given up under ExceptionPolicy.IGNORE (or RETRY with fallback IGNORE), and the "
            "policy is %s",
            processor.name,
            shown,
        )

    async def handler(self, parent: AsyncIterator[Any], **kwargs: Any) -> AsyncIterator[Any]:
        context = kwargs["context"]
        async for item in parent:
            try:
                yield item
            except GeneratorExit:
                exc = context.exception
                failed = isinstance(exc, Exception) and not isinstance(exc, asyncio.CancelledError)
                if failed and context.policy is ExceptionPolicy.IGNORE:
                    await self.forward(
                        item if isinstance(item, list) else [item], f"{type(exc).__name__}: {exc}"
                    )
                raise

    async def forward(self, events: list[Event], error: str = "") -> None:
        key = self.sink.partitions[0].id
        if self.source.record.is_primitive():
            entries = [(key, dict(e.data)) for e in events]
        else:
            now = datetime.now(UTC).isoformat()
            entries = [
                (
                    key,
                    self.sink.encode(
                        Dead(
                            failed_at=now,
                            partition=letter_partition(e.partition),
                            xid=e.xid.decode(),
                            data=e.data.get(b"data", b""),
                            error=error,
                        )
                    ),
                )
                for e in events
            ]
        await self.sink.append(entries)
        count = len(events)
        what = "failed event" if count == 1 else "failed events"
        log.warning("forwarded %d %s to %s", count, what, self.sink.name)
