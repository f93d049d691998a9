"""Reading streams into Spark: batch reads over id ranges, and micro-batches for streaming.

Every task reads one range of one partition through the store's synchronous log
(:class:`runnel.store.synclog.SyncLog`), ``chunkSize`` entries per round trip, and hands Spark
one Arrow batch per chunk. JSON records of plain fields are decoded a chunk at a time
(:mod:`runnel_spark.columnar`); any other chunk entry by entry with the stream's own
``decode``, so every codec, compression and primitive records work.
"""

from __future__ import annotations

import dataclasses
import gc
import json
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from runnel.exceptions import DecodeError, Misconfigured
from runnel.record import Record
from runnel.store.log import PartitionId
from runnel.store.synclog import Entries, next_id
from runnel.stream import DATA, Stream
from runnel_spark import ranges
from runnel_spark.columnar import ChunkDecoder, chunk_decoder
from runnel_spark.schema import ID, PARTITION, TIMESTAMP, derive
from runnel_spark.target import Target, positive

try:  # PySpark >= 4.2: rate limits and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - PySpark 4.0/4.1
    ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stands in for PySpark's mixin, which older versions lack."""


SPLIT_SIZE = 100_000
"""Entries per Spark input partition, about: a larger stream partition is read in parts."""


@dataclasses.dataclass
class Split(InputPartition):
    """One task's work: the entries of partition ``number`` from ``lo`` to ``hi`` (ids,
    both included)."""

    number: int
    partition: PartitionId
    lo: str
    hi: str


class RunnelReader(DataSourceReader):
    """``spark.read.format("runnel")``: a snapshot of the stream as it was when planned."""

    def __init__(self, target: Target, schema: StructType, options: dict[str, str]) -> None:
        self.target = target
        self.schema = schema
        self.start = ranges.parse_id(options.get("start", "-"), end=False, option="start")
        self.end = ranges.parse_id(options.get("end", "+"), end=True, option="end")
        self.split_size = positive(options, "splitsize", SPLIT_SIZE)

    def partitions(self) -> list[InputPartition]:
        stream = self.target.stream()
        keys = self.target.partitions(stream)
        # The last id of each partition now bounds the read, so what is written while the
        # query runs (by this very job, say) is not read.
        found = self.target.sync_log().extents(keys)
        splits: list[InputPartition] = []
        for number, (key, extent) in enumerate(zip(keys, found, strict=True)):
            for lo, hi in ranges.plan(ranges.extent(extent), self.start, self.end, self.split_size):
                splits.append(Split(number, key, lo, hi))
        return splits

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, Split):  # nothing to read: Spark asks with None
            return iter(())
        return read_split(self.target, self.schema, partition)


class RunnelStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("runnel")``: offsets are the last id read per partition.

    They live in Spark's checkpoint, so a restarted query goes on after the last
    micro-batch it committed; no consumer group is created or moved. With
    ``maxEntriesPerTrigger`` a micro-batch reads at most that many entries;
    ``trigger(availableNow=True)`` reads what is there when the query starts, then stops.
    """

    def __init__(self, target: Target, schema: StructType, options: dict[str, str]) -> None:
        self.target = target
        self.schema = schema
        self.starting = options.get("startingoffsets", "earliest")
        self.max_entries = (
            positive(options, "maxentriespertrigger", 1)
            if "maxentriespertrigger" in options
            else None
        )
        self.until: dict[str, str] | None = None

    def _keys(self) -> tuple[Stream, list[PartitionId]]:
        stream = self.target.stream()
        return stream, self.target.partitions(stream)

    def initialOffset(self) -> dict[str, str]:
        stream, _ = self._keys()
        starting = self.starting.strip()
        if starting.lower() == "earliest":
            return {str(n): ranges.show(ranges.FIRST) for n in range(stream.partition_count)}
        if starting.lower() == "latest":
            return self._latest()
        try:
            given = json.loads(starting)
            offsets = {str(n): ranges.show(ranges.FIRST) for n in range(stream.partition_count)}
            for n, xid in given.items():
                if str(n) not in offsets:
                    raise ValueError(f"no partition {n}")
                offsets[str(n)] = ranges.show(ranges.parse_id(str(xid), end=True))
            return offsets
        except (ValueError, AttributeError, Misconfigured) as exc:
            raise Misconfigured(
                f"option startingOffsets={starting!r} must be 'earliest', 'latest' or JSON "
                f'{{"PARTITION": "LAST-ID-READ", ...}} ({exc})'
            ) from None

    def _latest(self) -> dict[str, str]:
        """The newest id of each partition now (capped by ``until`` for availableNow)."""
        _, keys = self._keys()
        found = self.target.sync_log().extents(keys)
        first = ranges.show(ranges.FIRST)
        latest = {str(n): extent.last or first for n, extent in enumerate(found)}
        if self.until is not None:
            for n, xid in latest.items():
                cap = self.until.get(n, first)
                if ranges.split_id(cap) < ranges.split_id(xid):
                    latest[n] = cap
        return latest

    def prepareForTriggerAvailableNow(self) -> None:
        """``trigger(availableNow=True)``: read up to what is there now, then stop."""
        self.until = None
        self.until = self._latest()

    def getDefaultReadLimit(self) -> Any:
        if self.max_entries is not None and ReadMaxRows is not None:
            return ReadMaxRows(self.max_entries)
        return super().getDefaultReadLimit()

    # PySpark 4.0 and 4.1 call this without arguments, later ones with both.
    def latestOffset(
        self, start: dict[str, str] | None = None, limit: Any = None
    ) -> dict[str, str]:
        latest = self._latest()
        if start is None or ReadMaxRows is None or not isinstance(limit, ReadMaxRows):
            return latest
        return self._bounded(start, latest, limit.max_rows)

    def _bounded(
        self, start: dict[str, str], latest: dict[str, str], budget: int
    ) -> dict[str, str]:
        """At most ``budget`` entries past ``start``, shared evenly by partitions with new ones."""
        first = ranges.show(ranges.FIRST)
        out = {n: start.get(n, first) for n in latest}
        behind = [n for n, xid in latest.items() if ranges.split_id(xid) > ranges.split_id(out[n])]
        if not behind:
            return out
        each, extra = divmod(budget, len(behind))
        shares = {n: each + (i < extra) for i, n in enumerate(behind)}
        asked = [n for n in behind if shares[n] > 0]
        _, keys = self._keys()
        found = self.target.sync_log().nth_ids(
            [(keys[int(n)], next_id(out[n]), latest[n], shares[n]) for n in asked]
        )
        for n, xid in zip(asked, found, strict=True):
            if xid is not None:
                out[n] = xid
        return out

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> list[InputPartition]:
        _, keys = self._keys()
        splits: list[InputPartition] = []
        first = ranges.show(ranges.FIRST)
        for number, key in enumerate(keys):
            after, upto = start.get(str(number), first), end.get(str(number), first)
            if ranges.split_id(upto) <= ranges.split_id(after):
                continue
            splits.append(Split(number, key, first if after == first else next_id(after), upto))
        return splits

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Split)
        return read_split(self.target, self.schema, partition)

    def commit(self, end: dict[str, str]) -> None:
        """Nothing to do: the store keeps the entries until ``partition_size`` trims them."""


def read_split(target: Target, schema: StructType, split: Split) -> Iterator[pa.RecordBatch]:
    stream = target.stream()
    log = target.sync_log()
    build = _batch_builder(stream, schema)
    decode = stream.decode
    _settle()
    for entries in log.read(split.partition, split.lo, split.hi, target.chunk):
        ids = [xid for xid, _ in entries]
        if build.chunk is not None:
            columns = _whole(build.chunk, entries)
            if columns is not None:
                yield build.columns(columns, ids, split.number)
                continue
        try:
            records = [decode(fields) for _, fields in entries]
        except DecodeError:  # find which, loading newer schemas first if there are any
            records = [_decode(target, stream, split, xid, fields) for xid, fields in entries]
        yield build.records(records, ids, split.number)


_settled = False


def _settle() -> None:
    """Once per process, before its first read: move what is alive (modules, the stream's
    classes) out of the garbage collector's sight.

    A Python worker holds pyspark, pyarrow and pandas; each full collection, which reading
    many entries sets off again and again, walked all of that and took about half of the
    read's time. Garbage made later is collected as usual (``gc.freeze``'s own use case).
    """
    global _settled
    if not _settled:
        _settled = True
        gc.collect()
        gc.freeze()


def _whole(chunk: ChunkDecoder, entries: Entries) -> dict[str, Any] | None:
    """The chunk's columns decoded at once, or None to decode it entry by entry."""
    try:
        values = [fields[DATA] for _, fields in entries]
    except KeyError:
        return None
    return chunk(values)


def _decode(target: Target, stream: Stream, split: Split, xid: bytes, fields: Any) -> Record:
    try:
        return stream.decode(fields)
    except DecodeError as exc:
        # Written with a schema stored after the driver loaded them? Load and try again.
        if target.refresh_schemas(stream):
            return _decode(target, stream, split, xid, fields)
        raise DecodeError(
            f"cannot read entry {xid.decode()} of {stream.id} partition {split.number}: {exc}"
        ) from None


Plan = Callable[[list[Record], "pa.Array[Any]", int, pa.DataType], "pa.Array[Any]"]
"""One column of a chunk, from its records, entry ids (binary) and partition number."""


@dataclasses.dataclass
class Builder:
    """How a chunk becomes an Arrow batch of the columns a read asks for: from records, or
    from columns decoded at once (``chunk``, for streams that allow it)."""

    arrow: pa.Schema
    plans: list[Plan]
    fields: frozenset[str]
    """The columns that are record fields."""
    chunk: ChunkDecoder | None

    def records(self, records: list[Record], ids: list[bytes], number: int) -> pa.RecordBatch:
        xids = pa.array(ids, pa.binary())
        arrays = [
            fn(records, xids, number, f.type) for fn, f in zip(self.plans, self.arrow, strict=True)
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow)

    def columns(self, columns: dict[str, Any], ids: list[bytes], number: int) -> pa.RecordBatch:
        xids = pa.array(ids, pa.binary())
        arrays = [
            columns[f.name] if f.name in self.fields else fn([], xids, number, f.type)
            for fn, f in zip(self.plans, self.arrow, strict=True)
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow)


_builders: dict[tuple[Stream, str], Builder] = {}


def _batch_builder(stream: Stream, schema: StructType) -> Builder:
    """How chunks of ``stream`` become Arrow batches of the columns ``schema`` asks for."""
    key = (stream, schema.json())
    cached = _builders.get(key)
    if cached is None:
        cached = _builders[key] = _new_builder(stream, schema)
    return cached


def arrow_schema(schema: StructType) -> Any:
    """The Arrow schema of ``schema``, timestamps in UTC (PySpark 4.1 made the zone explicit)."""
    # Untyped on purpose: PySpark 4.0's signature lacks ``timezone``.
    convert: Callable[..., Any] = to_arrow_schema
    try:
        return convert(schema, timezone="UTC")
    except TypeError:  # PySpark 4.0
        return convert(schema)


def _new_builder(stream: Stream, schema: StructType) -> Builder:
    record = stream.record
    columns = {c.name: c for c in derive(record)}
    arrow = arrow_schema(schema)
    plans: list[Plan] = []
    for name in schema.names:
        if name in columns:
            plans.append(_field(name, columns[name].out))
        elif name == PARTITION:
            plans.append(_partition)
        elif name == ID:
            plans.append(_id)
        elif name == TIMESTAMP:
            plans.append(_timestamp)
        else:
            raise Misconfigured(
                f"column {name!r} is not a field of {record.__name__} "
                f"nor one of {PARTITION}, {ID}, {TIMESTAMP}"
            )
    wanted = {f.name: f.type for f in arrow if f.name in columns}
    return Builder(arrow, plans, frozenset(wanted), chunk_decoder(stream, wanted))


def _field(name: str, out: Any) -> Plan:
    if out is None:
        return lambda records, ids, number, kind: pa.array(
            [r.__dict__[name] for r in records], kind
        )
    return lambda records, ids, number, kind: pa.array(
        [out(r.__dict__[name]) for r in records], kind
    )


def _partition(records: list[Record], ids: Any, number: int, kind: pa.DataType) -> Any:
    return pa.repeat(pa.scalar(number, kind), len(ids))


def _id(records: list[Record], ids: Any, number: int, kind: pa.DataType) -> Any:
    return ids.cast(kind)


def _timestamp(records: list[Record], ids: Any, number: int, kind: pa.DataType) -> Any:
    """The milliseconds of each id, as a timestamp."""
    millis = pc.list_element(pc.split_pattern(ids.cast(pa.string()), "-", max_splits=1), 0)
    return pc.multiply(millis.cast(pa.int64()), 1000).cast(kind)
