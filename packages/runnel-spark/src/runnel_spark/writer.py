"""Writing DataFrames to streams: validate a whole task, then append it in atomic chunks.

Each Spark task turns its rows into records exactly as ``stream.send`` does (validate,
route with the stream's hasher, encode), so a key lands in the partition a Python
producer would pick. It checks every row before it sends any, so a bad row fails the task
with nothing of it written; then it appends the rows in order through the store's
synchronous log, ``chunkSize`` per round trip, each chunk all or none (the same append
``stream.send`` uses; on a Redis Cluster, all or none per stream partition), holding
each partition to ``partition_size`` as ``stream.send`` does (a full partition is
waited for, up to ``full_timeout``, unless the stream says ``on_full="drop_oldest"``).

Each row carries an identity (``exactlyOnce``, on by default), so a row its partition
already took is not appended again: the row's number in its task under a producer named
by the write and the task's Spark partition (:class:`SequencedIdentity`), or the value of
an ``idempotencyKey`` column (or of the stream's ``idempotency_key`` field) as an
application key (:class:`KeyedIdentity`). A retried or speculative attempt of a task, and
a micro-batch Spark runs again from its checkpoint, then append only what is not in yet,
within the stream's idempotence window. A task that fails while sending says how far it
got.
"""

from __future__ import annotations

import binascii
import dataclasses
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
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
from runnel.store.identity import Identity, KeyedIdentity, SequencedIdentity, key_bytes
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
    duplicates: int = 0
    """Rows found already in (appended by an earlier attempt) and not appended again."""


def check_columns(stream: Stream, schema: StructType, key_column: str | None = None) -> None:
    """Refuse, before any task runs, a DataFrame without a column some record field (or
    the ``idempotencyKey`` option) needs."""
    if key_column is not None and key_column not in schema.names:
        raise Misconfigured(
            f"cannot write to {stream.id}: option idempotencyKey={key_column!r} names no "
            f"column of the DataFrame (it has {', '.join(schema.names)})"
        )
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

    def __init__(
        self, stream: Stream, base64: Sequence[str] = (), key_field: str | None = None
    ) -> None:
        self.stream = stream
        self.into = into_record(stream.record)
        self.base64 = tuple(base64)
        """Fields whose text is base64 for their bytes (as files hold bytes)."""
        self.key_field = key_field
        """The record field whose value :attr:`key` keeps (the stream's ``idempotency_key``)."""
        self.key: Any = None
        """That field's value in the last row encoded (after validation, as ``send`` takes it)."""

    def __call__(self, row: dict[str, Any], where: str) -> tuple[int, dict[bytes, Any]]:
        stream = self.stream
        try:
            if self.base64:
                row = self._unbase64(row, where)
            record = stream.validate(self.into(row))
            if self.key_field is not None:
                self.key = getattr(record, self.key_field)
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


def write_task(target: Target, batches: Iterable[Any], write_id: str | None) -> WriteReport:
    """Validate every row of the task, then append them all; see the module docstring.

    ``write_id`` names the write (None: no identities, ``exactlyOnce=false``); with the
    task's Spark partition it names the producer of the task's rows, the same in every
    attempt of the task."""
    stream = target.stream()
    keyed = write_id is not None and target.key_column is None and stream.idempotency_key
    encode = Encoder(stream, key_field=stream.idempotency_key if keyed else None)
    spark_partition, attempt, place = task_place()
    keys = target.partitions(stream)
    entries = []
    app_keys: list[bytes | None] = []
    column = target.key_column if write_id is not None else None
    counts: Counter[int] = Counter()
    try:
        for number, row in enumerate(plain_rows(batches), 1):
            partition, fields = encode(row, f"row {number} of {place}")
            entries.append((keys[partition], fields))
            counts[partition] += 1
            if column is not None:
                app_keys.append(key_bytes(row.get(column)))
            elif keyed:
                app_keys.append(key_bytes(encode.key))
    except BadRow as exc:
        raise BadRow(f"{exc}; nothing of this task was written") from None

    def identity(start: int, stop: int) -> Identity | None:
        """Rows ``start`` to ``stop`` (from 0, ``stop`` excluded): by key, or numbered
        from 1 in the task's row order, which rises within every stream partition."""
        if write_id is None:
            return None
        if column is not None or keyed:
            return KeyedIdentity(app_keys[start:stop])
        return SequencedIdentity(f"{write_id}:{spark_partition}", range(start + 1, stop + 1))

    duplicates = append(target, stream, entries, place, identity)
    return WriteReport(spark_partition, attempt, len(entries), dict(counts), duplicates)


def append(
    target: Target,
    stream: Stream,
    entries: list[Any],
    place: str,
    identity: Callable[[int, int], Identity | None],
) -> int:
    """Append ``entries`` in chunks, in order; return how many were in already."""
    log = target.sync_log()
    sent = duplicates = 0
    again = (
        "a retry of the task appends only the rows not in yet"
        if identity(0, 0) is not None
        else "a retry of the task appends all of them again"
    )
    for start in range(0, len(entries), target.chunk):
        chunk = entries[start : start + target.chunk]
        try:
            duplicates += _append_with_room(log, stream, chunk, identity(start, start + len(chunk)))
        except LogFull as exc:
            raise WriteFailed(
                f"{stream.id}: appending the {len(entries)} rows of {place} stopped after "
                f"{sent}: {_written(sent)}, the rest are not: {exc}, and it did not make "
                f"room within {stream.app.settings.full_timeout:g} s (full_timeout); {again}"
            ) from exc
        except PartlyAppended as exc:
            raise WriteFailed(
                f"{stream.id}: appending the {len(entries)} rows of {place} failed after "
                f"{sent}: {_written(sent)}; of rows {sent + 1}-{sent + len(chunk)} "
                f"(the chunk in flight) {_parts(exc)}; the rest are not; {again} ({exc})"
            ) from exc
        except LogError as exc:
            raise WriteFailed(
                f"{stream.id}: appending the {len(entries)} rows of {place} failed after "
                f"{sent}: {_written(sent)}, rows {sent + 1}-{sent + len(chunk)} "
                "(the chunk in flight, appended all or none) may be, the rest are not; "
                f"{again} ({exc})"
            ) from exc
        sent += len(chunk)
    return duplicates


def _append_with_room(
    log: SyncLog, stream: Stream, chunk: list[Any], identity: Identity | None
) -> int:
    """Append one chunk; while a partition is full (the stream's ``on_full="wait"``),
    wait for its processor to make room, as ``stream.send`` does, up to ``full_timeout``.
    Returns how many of its rows were in already."""
    deadline = time.monotonic() + stream.app.settings.full_timeout
    pause = 0.01
    drop = stream.on_full == "drop_oldest"
    while True:
        try:
            if identity is None:
                log.append(chunk, stream.partition_size, drop_oldest=drop)
                return 0
            done = log.append(
                chunk,
                stream.partition_size,
                drop_oldest=drop,
                identity=identity,
                window=stream.idempotence,
            )
            return done.duplicates
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


def _summary(messages: Iterable[WriterCommitMessage | None]) -> tuple[int, int, int]:
    """Rows, finished tasks, and rows found already in, of a write's commit messages."""
    reports = [m for m in messages if isinstance(m, WriteReport)]
    return (
        sum(r.rows for r in reports),
        len(reports),
        sum(getattr(r, "duplicates", 0) for r in reports),
    )


QUERY_ID = "sql.streaming.queryId"
BATCH_ID = "streaming.sql.batchId"
"""Local properties Spark gives every task of a micro-batch: the query's id (kept in its
checkpoint, so the same after a restart) and the micro-batch's number."""


class RunnelWriter(DataSourceArrowWriter):
    """``df.write.format("runnel").mode("append")``.

    Made once per write on the driver and pickled to every task, so :attr:`write_id` is
    the same in every attempt of every task of the write, and new for the next write."""

    def __init__(self, target: Target, stream_id: str) -> None:
        self.target = target
        self.stream_id = stream_id
        self.write_id = uuid.uuid4().hex if target.exactly_once else None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteReport:
        return write_task(self.target, iterator, self.write_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        rows, tasks, duplicates = _summary(messages)
        log.info(
            "appended %d rows to %s in %d tasks (%d found already in, from earlier attempts)",
            rows - duplicates,
            self.stream_id,
            tasks,
            duplicates,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        rows, tasks, _ = _summary(messages)
        log.warning(
            "writing to %s failed; %d tasks that had finished appended %d rows, which stay "
            "in the stream",
            self.stream_id,
            tasks,
            rows,
        )


class RunnelStreamWriter(DataSourceStreamWriter, DataSourceArrowWriter):
    """``df.writeStream.format("runnel")``: each micro-batch is appended like a batch write.

    Its write id is the query's id and the micro-batch's number, both of which Spark keeps
    in the checkpoint: a micro-batch run again after a restart (its sink wrote, Spark had
    not committed it) appends nothing twice. It takes Arrow batches (as the batch writer
    does) where Spark hands them over, and ``Row`` objects otherwise.
    """

    def __init__(self, target: Target, stream_id: str) -> None:
        self.target = target
        self.stream_id = stream_id
        self.run_id = uuid.uuid4().hex
        """Stands for the query's id if a Spark version did not give it to tasks."""

    def write(self, iterator: Iterator[Any]) -> WriteReport:
        return write_task(self.target, iterator, self.write_id())

    def write_id(self) -> str | None:
        if not self.target.exactly_once:
            return None
        context = TaskContext.get()
        query = context.getLocalProperty(QUERY_ID) if context is not None else None
        batch = context.getLocalProperty(BATCH_ID) if context is not None else None
        if batch is None and context is not None:
            batch = f"stage{context.stageId()}"
        return f"{query or self.run_id}:{batch}"

    def commit(  # type: ignore[override]
        self, messages: list[WriterCommitMessage | None], batchId: int
    ) -> None:
        rows, _, duplicates = _summary(messages)
        log.info(
            "micro-batch %d: appended %d rows to %s (%d found already in, from earlier attempts)",
            batchId,
            rows - duplicates,
            self.stream_id,
            duplicates,
        )

    def abort(  # type: ignore[override]
        self, messages: list[WriterCommitMessage | None], batchId: int
    ) -> None:
        rows, tasks, _ = _summary(messages)
        again = (
            "when Spark runs the micro-batch again, they are not appended twice"
            if self.target.exactly_once
            else "Spark runs the micro-batch again: at least once"
        )
        log.warning(
            "micro-batch %d to %s failed; %d finished tasks appended %d rows, which stay in "
            "the stream (%s)",
            batchId,
            self.stream_id,
            tasks,
            rows,
            again,
        )
