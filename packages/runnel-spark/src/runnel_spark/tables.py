"""Reading a table's committed state into Spark (``option("table", ...)``).

A table keeps its state per partition of its source stream, so each Spark task reads one
table partition: it scans it through the store's table role
(:class:`runnel.store.state.TableStore`), ``chunkSize`` keys per round trip in an event
loop of its own, and hands Spark one Arrow batch per page. Nothing is written to the store.
A scan is not a snapshot: a key committed while it runs may be read with either value.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pyarrow as pa
from pydantic import TypeAdapter, ValidationError
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from runnel.app import App
from runnel.exceptions import DecodeError, Misconfigured
from runnel.imports import import_object
from runnel.store.log import PartitionId
from runnel.store.resolve import backend_for
from runnel.tables import META, TableBase, WindowedTable
from runnel_spark.reader import arrow_schema
from runnel_spark.schema import PARTITION, derive, to_json
from runnel_spark.target import positive

KEY, WINDOW_START, WINDOW_END, VALUE = "key", "window_start", "window_end", "value"

STREAM_ONLY = {"start": "start", "end": "end", "splitsize": "splitSize"}
"""Options of stream reads that mean nothing for a table (lower case: display name)."""

_tables: dict[tuple[str, str | None], TableBase] = {}


def names_table(options: Mapping[str, str]) -> bool:
    """Whether the (lower-cased) options name a table; refuses options that do not go
    together, each with its own message."""
    path = options.get("table")
    if not path:
        for name in ("since", "until"):
            if name in options:
                raise Misconfigured(
                    f"option {name} keeps the windows of a windowed table (option table); "
                    "a stream read takes start and end"
                )
        return False
    if options.get("stream") or options.get("path"):
        raise Misconfigured(
            f"options table and stream both name what to read: give one of them (table={path!r})"
        )
    for name, shown in STREAM_ONLY.items():
        if name in options:
            raise Misconfigured(
                f"option {shown} is for streams; a table (table={path!r}) is read whole, "
                "or, when windowed, by window start with since and until"
            )
    return True


def load_table(path: str, app: str | None = None) -> TableBase:
    """The table ``MODULE:TABLE``, or the one named ``path`` of the app ``MODULE:APP``; a
    table made windowed later (``counts.tumbling(60)``) is its windowed form."""
    cached = _tables.get((path, app))
    if cached is not None:
        return cached
    if app:
        owner = import_object(app)
        if not isinstance(owner, App):
            raise Misconfigured(f"app={app!r} is {type(owner).__name__}, not a runnel App")
        if path not in owner.tables:
            known = ", ".join(sorted(owner.tables)) or "none"
            raise Misconfigured(f"app {app!r} declares no table {path!r} (it has: {known})")
        found: Any = owner.tables[path]
    else:
        if ":" not in path:
            raise Misconfigured(
                f"table={path!r}: give MODULE:TABLE (a table object), "
                "or app=MODULE:APP with table=NAME"
            )
        found = import_object(path)
        if not isinstance(found, TableBase):
            raise Misconfigured(f"table={path!r} is {type(found).__name__}, not a runnel table")
    table: TableBase = found.replaced_by or found
    _tables[(path, app)] = table
    return table


def _moment(options: Mapping[str, str], name: str) -> float | None:
    """Option ``name`` as seconds of event time: a number, or an ISO 8601 time (UTC when
    it has no zone)."""
    raw = options.get(name)
    if raw is None:
        return None
    text = raw.strip()
    try:
        value = float(text)
    except ValueError:
        try:
            moment = datetime.datetime.fromisoformat(text)
        except ValueError:
            raise Misconfigured(
                f"option {name}={raw!r} is neither seconds nor an ISO 8601 time"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.UTC)
        return moment.timestamp()
    if not math.isfinite(value):
        raise Misconfigured(f"option {name}={raw!r} is neither seconds nor an ISO 8601 time")
    return value


def table_id(table: TableBase) -> str:
    return f"{table.app.name}.{table.name}"


def _signature(table: TableBase) -> tuple[Any, ...]:
    serializer = table.codec.serializer
    compressor = getattr(serializer, "compressor", None)
    record = table.record
    windows = tuple(sorted(table.describe().items())) if isinstance(table, WindowedTable) else None
    return (
        table_id(table),
        table.source.name,
        table.source.partition_count,
        f"{record.__module__}.{record.__qualname__}" if record is not None else None,
        type(serializer).__name__,
        type(compressor).__name__ if compressor is not None else None,
        windows,
        type(table.default).__name__,
    )


_SIGNATURE_NAMES = (
    "table",
    "source stream",
    "partition_count",
    "record",
    "serializer",
    "compressor",
    "windows",
    "default",
)


@dataclasses.dataclass
class TableTarget:
    """A table and its store, as the driver resolved them; picklable for executors."""

    table_path: str
    app_path: str | None
    url: str
    signature: tuple[Any, ...]
    chunk: int = 1000
    since: float = -math.inf
    until: float = math.inf

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> TableTarget:
        """Read the (lower-cased) options on the driver: import the table."""
        path = options["table"]
        app_path = options.get("app") or None
        table = load_table(path, app_path)
        since, until = _moment(options, "since"), _moment(options, "until")
        if (since is not None or until is not None) and not isinstance(table, WindowedTable):
            raise Misconfigured(
                f"options since and until keep windows by their start, and table "
                f"{table.name!r} is not windowed"
            )
        low = -math.inf if since is None else since
        high = math.inf if until is None else until
        if low >= high:
            raise Misconfigured(f"option since ({low}) must be before until ({high})")
        return cls(
            table_path=path,
            app_path=app_path,
            url=options.get("url") or table.app.settings.redis_url,
            signature=_signature(table),
            chunk=positive(options, "chunksize", 1000),
            since=low,
            until=high,
        )

    def prepare(self) -> None:
        """On the driver: check that the store keeps tables and that the table was built
        with the partition count declared, and take the URL the transport resolved
        (``redis+embedded://`` becomes its server's) for executors."""
        table = self.table()

        async def run() -> int | None:
            transport = backend_for(self.url, table.app.settings)
            try:
                store = transport.table_store(table.app.name)
                if store is None:
                    raise Misconfigured(f"{type(transport).__name__} keeps no tables")
                recorded = (await store.partition_counts([table.name])).get(table.name)
                log = transport.sync_log()
                if log is not None:
                    self.url = log.url
                    log.close()
                return recorded
            finally:
                await transport.aclose()

        recorded = asyncio.run(run())
        declared = table.source.partition_count
        if recorded is not None and recorded != declared:
            raise Misconfigured(
                f"table {table.name!r} was built with {recorded} partitions, but its stream "
                f"{table.source.name!r} is declared with {declared}: declare "
                f"partition_count={recorded} again to read it"
            )

    def table(self) -> TableBase:
        """The table, imported in this process, as the driver saw it."""
        table = load_table(self.table_path, self.app_path)
        mine = _signature(table)
        if mine != self.signature:
            different = ", ".join(
                f"{name} {a!r} on the driver, {b!r} here"
                for name, a, b in zip(_SIGNATURE_NAMES, self.signature, mine, strict=True)
                if a != b
            )
            raise Misconfigured(
                f"{self.table_path} imported here is not what the driver imported: {different}; "
                "give every Spark process the same code and RUNNEL_* environment"
            )
        return table


class Unfit(ValueError):
    """A value that its column cannot hold."""


Fit = Callable[[Any], tuple[Any, ...]]
"""A table value to the values of its columns; raises :class:`Unfit`."""


def _int(value: Any) -> Any:
    if value is None or (
        isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63
    ):
        return value
    raise Unfit("bigint")


def _float(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise Unfit("double")


def _str(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    raise Unfit("string")


def _bool(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    raise Unfit("boolean")


SCALARS: dict[type, tuple[DataType, Callable[[Any], Any]]] = {
    bool: (BooleanType(), _bool),
    int: (LongType(), _int),
    float: (DoubleType(), _float),
    str: (StringType(), _str),
}
"""A table default of these types gives one ``value`` column of that Spark type."""


@dataclasses.dataclass
class Layout:
    """The columns of a table read, and how a stored key and value become them."""

    schema: StructType
    key: Callable[[bytes], Any]
    key_type: str
    fit: Fit


def _key(table: TableBase) -> tuple[StructField, Callable[[bytes], Any], str]:
    """The key column: typed as the source's ``partition_by`` field when Spark has a type
    for it, else the key's JSON."""
    source = table.source
    field = getattr(source, "partition_by", None)
    record = getattr(source, "record", None)
    if isinstance(field, str) and record is not None:
        column = next((c for c in derive(record) if c.name == field), None)
        if column is not None and not column.json:
            adapter: TypeAdapter[Any] = TypeAdapter(record.model_fields[field].annotation)
            out = column.out

            def typed(raw: bytes) -> Any:
                value = adapter.validate_json(raw, strict=True)
                return value if out is None else out(value)

            shown = f"{column.type.simpleString()}, as field {field} of {record.__name__}"
            return StructField(KEY, column.type, column.nullable), typed, shown
    return StructField(KEY, StringType(), False), bytes.decode, "string"


def _values(table: TableBase) -> tuple[list[StructField], Fit]:
    record = table.record
    if record is not None:
        columns = derive(record)
        plans = [(c.name, c.out) for c in columns]

        def fields(value: Any) -> tuple[Any, ...]:
            if not isinstance(value, record):
                raise Unfit(record.__name__)
            attrs = value.__dict__
            return tuple(attrs[n] if fn is None else fn(attrs[n]) for n, fn in plans)

        return [StructField(c.name, c.type, c.nullable) for c in columns], fields
    scalar = SCALARS.get(type(table.default))
    if scalar is not None:
        kind, check = scalar
        return [StructField(VALUE, kind, True)], lambda value: (check(value),)
    return [StructField(VALUE, StringType(), False)], lambda value: (to_json(value),)


def layout(table: TableBase) -> Layout:
    """The schema of a table read: ``_partition``, ``key``, for windowed tables
    ``window_start`` and ``window_end``, then the value columns."""
    key, convert, key_type = _key(table)
    front = [StructField(PARTITION, IntegerType(), False), key]
    if isinstance(table, WindowedTable):
        front += [
            StructField(WINDOW_START, DoubleType(), False),
            StructField(WINDOW_END, DoubleType(), False),
        ]
    values, fit = _values(table)
    taken = {f.name for f in front}
    clash = [f.name for f in values if f.name in taken]
    if clash:
        raise Misconfigured(
            f"table {table.name!r}: record field {clash[0]!r} has the name of a column the "
            f"read adds ({', '.join(f.name for f in front)})"
        )
    return Layout(StructType([*front, *values]), convert, key_type, fit)


def table_schema(table: TableBase) -> StructType:
    """The schema of a DataFrame read from ``table`` (see docs/spark.md)."""
    return layout(table).schema


@dataclasses.dataclass
class TablePart(InputPartition):
    """One task's work: partition ``number`` of the table."""

    number: int


class TableReader(DataSourceReader):
    """``spark.read.format("runnel").option("table", ...)``: one task per table partition."""

    def __init__(self, target: TableTarget, schema: StructType) -> None:
        self.target = target
        self.schema = schema
        known = set(layout(target.table()).schema.names)
        for name in schema.names:
            if name not in known:
                raise Misconfigured(
                    f"column {name!r} is not one of the table's ({', '.join(sorted(known))})"
                )

    def partitions(self) -> list[InputPartition]:
        count = self.target.table().source.partition_count
        return [TablePart(n) for n in range(count)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, TablePart):  # nothing to read: Spark asks with None
            return iter(())
        return read_part(self.target, self.schema, partition.number)


def read_part(target: TableTarget, schema: StructType, number: int) -> Iterator[pa.RecordBatch]:
    """The committed keys of one table partition, a batch per page of the scan."""
    table = target.table()
    build = Batches(table, target, schema, number)
    # Named here, not by the stream, which would build the app's own store to name it.
    partition = PartitionId(table.app.name, table.source.name, number)
    loop = asyncio.new_event_loop()
    transport = backend_for(target.url, table.app.settings)
    try:
        store = transport.table_store(table.app.name)
        if store is None:
            raise Misconfigured(f"{type(transport).__name__} keeps no tables")
        cursor = b""
        while True:
            cursor, entries = loop.run_until_complete(
                store.scan(table.name, partition, cursor, target.chunk)
            )
            batch = build.batch(entries)
            if batch is not None:
                yield batch
            if not cursor:
                break
    finally:
        loop.run_until_complete(transport.aclose())
        loop.close()


class Batches:
    """Pages of a partition's scan as Arrow batches of the columns asked for; each key
    once (a scan may return a key again when the store rehashes meanwhile)."""

    def __init__(
        self, table: TableBase, target: TableTarget, schema: StructType, number: int
    ) -> None:
        self.table = table
        self.number = number
        self.layout = layout(table)
        self.windowed = table if isinstance(table, WindowedTable) else None
        self.since, self.until = target.since, target.until
        self.arrow = arrow_schema(schema)
        index = {name: i for i, name in enumerate(self.layout.schema.names)}
        self.picks = [index[name] for name in schema.names]
        self.seen: set[bytes] = set()

    def _fail(self, raw_key: bytes, why: str) -> DecodeError:
        shown = raw_key.decode(errors="replace")
        return DecodeError(
            f"cannot read key {shown} of table {table_id(self.table)} "
            f"partition {self.number}: {why}"
        )

    def rows(self, raw_key: bytes, raw: bytes) -> list[tuple[Any, ...]]:
        try:
            key = self.layout.key(raw_key)
        except (ValidationError, ValueError, TypeError) as exc:
            why = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            raise self._fail(
                raw_key, f"the key does not fit column key ({self.layout.key_type}): {why}"
            ) from None
        try:
            value = self.table.codec.decode(raw)
        except Exception as exc:  # the serializer (a plugin) or a record's validation
            raise self._fail(raw_key, f"its value cannot be decoded: {exc}") from None
        if self.windowed is None:
            return [(self.number, key, *self._fit(raw_key, value))]
        out = []
        for window, held in self.windowed.kind.windows(value):
            if self.since <= window.start < self.until:
                out.append((self.number, key, window.start, window.end, *self._fit(raw_key, held)))
        return out

    def _fit(self, raw_key: bytes, value: Any) -> tuple[Any, ...]:
        try:
            return self.layout.fit(value)
        except Unfit as exc:
            raise self._fail(
                raw_key, f"its value {_show(value)} does not fit its column ({exc})"
            ) from None
        except Exception as exc:  # a conversion of a record field
            raise self._fail(
                raw_key, f"its value {_show(value)} cannot be converted: {exc}"
            ) from None

    def batch(self, entries: list[tuple[bytes, bytes]]) -> pa.RecordBatch | None:
        rows: list[tuple[Any, ...]] = []
        keys: list[bytes] = []
        for raw_key, raw in entries:
            if raw_key in self.seen or (self.windowed is not None and raw_key == META):
                continue
            self.seen.add(raw_key)
            made = self.rows(raw_key, raw)
            rows += made
            keys += [raw_key] * len(made)
        if not rows:
            return None
        arrays = [
            self._array([r[i] for r in rows], field, keys)
            for i, field in zip(self.picks, self.arrow, strict=True)
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow)

    def _array(self, values: list[Any], field: pa.Field, keys: list[bytes]) -> Any:
        try:
            return pa.array(values, field.type)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            for value, raw_key in zip(values, keys, strict=True):  # say which key
                try:
                    pa.array([value], field.type)
                except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
                    raise self._fail(
                        raw_key,
                        f"column {field.name} ({field.type}) cannot hold {_show(value)}: {exc}",
                    ) from None
            raise


def _show(value: Any, limit: int = 200) -> str:
    try:
        text = to_json(value)
    except Exception:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
