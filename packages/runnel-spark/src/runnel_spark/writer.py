"""Writing DataFrames to streams: validate a whole task, then append it in atomic chunks.

Each Spark task turns its rows into records exactly as ``stream.send`` does (validate,
route with the stream's hasher, encode), so a key lands in the partition a Python
producer would pick. It checks every row before it sends any, so a bad row fails the task
with nothing of it written; then it appends the rows in order through the store's
synchronous log, ``chunkSize`` per round trip, each chunk all or none (the same append
``stream.send`` uses; on a Redis Cluster, all or none per stream partition), holding
each partition to ``partition_size`` as ``stream.send`` does (a full partition is
waited for, up to ``full_timeout``, unless the stream says ``on_full="drop_oldest"``).

Delivery is at least once. A task that fails while sending says how far it got; when
Spark runs it again, the new attempt sends all its rows again, so the chunks the failed
attempt had written are in the stream twice.
"""

from __future__ import annotations

import binascii
import dataclasses
import json
import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pydantic import ValidationError
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from runnel.commands import describe, shown_plain
from runnel.exceptions import Misconfigured, RunnelError
from runnel.store.synclog import LogError, LogFull, PartlyAppended, SyncLog
from runnel.stream import Stream
from runnel_spark.schema import into_record
from runnel_spark.target import Target

log = logging.getLogger("runnel.spark")

SHOWN = 300
"""Characters of an offending row quoted in an error."""


class BadRow(RunnelError):
    """A row that is not a valid record of the stream (or cannot be routed or encoded)."""


class WriteFailed(RunnelError):
    """Appending to the store failed part-way through a task."""


@dataclasses.dataclass
class WriteReport(WriterCommitMessage):
    """What one task appended: rows per stream partition."""

    spark_partition: int
    attempt: int
    rows: int
    partitions: dict[int, int]


def check_columns(stream: Stream, schema: StructType) -> None:
    """Refuse, before any task runs, a DataFrame without a column some record field needs."""
    missing = [
        name
        for name, info in stream.record.model_fields.items()
        if info.is_required() and name not in schema.names
    ]
    if missing:
        raise Misconfigured(
            f"cannot write to {stream.id}: the DataFrame has no column {', '.join(missing)} "
            f"(required by {stream.record.__name__}; it has {', '.join(schema.names)})"
        )


class Encoder:
    """Turns plain rows into ``(partition number, fields)`` exactly as producers do."""

    def __init__(self, stream: Stream, base64: Sequence[str] = ()) -> None:
        self.stream = stream
        self.into = into_record(stream.record)
        self.base64 = tuple(base64)
        """Fields whose text is base64 for their bytes (as files hold bytes)."""

    def __call__(self, row: dict[str, Any], where: str) -> tuple[int, dict[bytes, Any]]:
        stream = self.stream
        try:
            if self.base64:
                row = self._unbase64(row, where)
            record = stream.validate(self.into(row))
            return stream.partition_number(record), stream.encode(record)
        except ValidationError as exc:
            problem = f"is not a valid {stream.record.__name__}: {describe(exc)}"
        except Exception as exc:
            problem = f"cannot be routed or encoded: {type(exc).__name__}: {exc}"
        raise BadRow(f"{stream.id}: {where} {problem}; the row: {_show(row)}")

    def _unbase64(self, row: dict[str, Any], where: str) -> dict[str, Any]:
        decoded = dict(row)
        for name in self.base64:
            value = row.get(name)
            if isinstance(value, str):
                try:
                    decoded[name] = binascii.a2b_base64(value, strict_mode=True)
                except binascii.Error as exc:
                    raise BadRow(
                        f"{self.stream.id}: {where} is not a valid {self.stream.record.__name__}: "
                        f"{name}: bytes must be given as base64 ({exc}) "
                        f"(got {json.dumps(value, ensure_ascii=False)}); the row: {_show(row)}"
                    ) from None
        return decoded


def plain_rows(batches: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Rows as dicts, whether Spark hands over Arrow batches or ``Row`` objects."""
    for item in batches:
        if isinstance(item, pa.RecordBatch):
            yield from item.to_pylist()
        else:
            yield item.asDict(recursive=True)


def task_place() -> tuple[int, int, str]:
    """This task's Spark partition, attempt number, and a phrase saying so."""
    context = TaskContext.get()
    if context is None:
        return 0, 0, "this task"
    partition, attempt = context.partitionId(), context.attemptNumber()
    batch = context.getLocalProperty("streaming.sql.batchId")
    place = f"Spark partition {partition} (attempt {attempt}"
    return partition, attempt, place + (f", micro-batch {batch})" if batch else ")")


def write_task(target: Target, batches: Iterable[Any]) -> WriteReport:
    """Validate every row of the task, then append them all; see the module docstring."""
    stream = target.stream()
    encode = Encoder(stream)
    spark_partition, attempt, place = task_place()
    keys = target.partitions(stream)
    entries = []
    counts: Counter[int] = Counter()
    try:
        for number, row in enumerate(plain_rows(batches), 1):
            partition, fields = encode(row, f"row {number} of {place}")
            entries.append((keys[partition], fields))
            counts[partition] += 1
    except BadRow as exc:
        raise BadRow(f"{exc}; nothing of this task was written") from None
    append(target, stream, entries, place)
    return WriteReport(spark_partition, attempt, len(entries), dict(counts))


def append(target: Target, stream: Stream, entries: list[Any], place: str) -> None:
    log = target.sync_log()
    sent = 0
    for start in range(0, len(entries), target.chunk):
        chunk = entries[start : start + target.chunk]
        try:
            _append_with_room(log, stream, chunk)
        except LogFull as exc:
            raise WriteFailed(
                f"{stream.id}: appending the {len(entries)} rows of {place} stopped after "
                f"{sent}: {_written(sent)}, the rest are not: {exc}, and it did not make "
                f"room within {stream.app.settings.full_timeout:g} s (full_timeout); a retry "
                "of the task appends all of them again"
            ) from exc
        except PartlyAppended as exc:
            raise WriteFailed(
                f"{stream.id}: appending the {len(entries)} rows of {place} failed after "
                f"{sent}: {_written(sent)}; of rows {sent + 1}-{sent + len(chunk)} "
                f"(the chunk in flight) {_parts(exc)}; the rest are not; a retry of the task "
                f"appends all of them again ({exc})"
            ) from exc
        except LogError as exc:
            raise WriteFailed(
                f"{stream.id}: appending the {len(entries)} rows of {place} failed after "
                f"{sent}: {_written(sent)}, rows {sent + 1}-{sent + len(chunk)} "
                "(the chunk in flight, appended all or none) may be, the rest are not; "
                f"a retry of the task appends all of them again ({exc})"
            ) from exc
        sent += len(chunk)


def _append_with_room(log: SyncLog, stream: Stream, chunk: list[Any]) -> None:
    """Append one chunk; while a partition is full (the stream's ``on_full="wait"``),
    wait for its processor to make room, as ``stream.send`` does, up to ``full_timeout``."""
    deadline = time.monotonic() + stream.app.settings.full_timeout
    pause = 0.01
    drop = stream.on_full == "drop_oldest"
    while True:
        try:
            log.append(chunk, stream.partition_size, drop_oldest=drop)
            return
        except LogFull:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.5)


def _written(sent: int) -> str:
    return f"rows 1-{sent} are in the stream" if sent else "no row is in the stream yet"


def _parts(exc: PartlyAppended) -> str:
    """Which stream partitions' rows of a chunk are in, are not, or may be."""
    said = [
        f"those to stream partitions {', '.join(str(p.number) for p in parts)} {verb}"
        for parts, verb in (
            (exc.written, "are in"),
            (exc.refused, "are not"),
            (exc.unknown, "may be"),
        )
        if parts
    ]
    return ", ".join(said)


def _show(row: dict[str, Any]) -> str:
    text = json.dumps(row, default=shown_plain, ensure_ascii=False)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def _summary(messages: Iterable[WriterCommitMessage | None]) -> tuple[int, int]:
    reports = [m for m in messages if isinstance(m, WriteReport)]
    return sum(r.rows for r in reports), len(reports)


class RunnelWriter(DataSourceArrowWriter):
    """``df.write.format("runnel").mode("append")``."""

    def __init__(self, target: Target, stream_id: str) -> None:
        self.target = target
        self.stream_id = stream_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteReport:
        return write_task(self.target, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        rows, tasks = _summary(messages)
        log.info("appended %d rows to %s in %d tasks", rows, self.stream_id, tasks)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        rows, tasks = _summary(messages)
        log.warning(
            "writing to %s failed; %d tasks that had finished appended %d rows, which stay "
            "in the stream",
            self.stream_id,
            tasks,
            rows,
        )


class RunnelStreamWriter(DataSourceStreamWriter, DataSourceArrowWriter):
    """``df.writeStream.format("runnel")``: each micro-batch is appended like a batch write.

    It takes Arrow batches (as the batch writer does) where Spark hands them over, and
    ``Row`` objects otherwise.
    """

    def __init__(self, target: Target, stream_id: str) -> None:
        self.target = target
        self.stream_id = stream_id

    def write(self, iterator: Iterator[Any]) -> WriteReport:
        return write_task(self.target, iterator)

    def commit(  # type: ignore[override]
        self, messages: list[WriterCommitMessage | None], batchId: int
    ) -> None:
        rows, _ = _summary(messages)
        log.info("micro-batch %d: appended %d rows to %s", batchId, rows, self.stream_id)

    def abort(  # type: ignore[override]
        self, messages: list[WriterCommitMessage | None], batchId: int
    ) -> None:
        rows, tasks = _summary(messages)
        log.warning(
            "micro-batch %d to %s failed; %d finished tasks appended %d rows, which stay in "
            "the stream (Spark runs the micro-batch again: at least once)",
            batchId,
            self.stream_id,
            tasks,
            rows,
        )
