"""What every table is: state kept per partition of a source stream, exactly once.

Inside the processor of its source stream, ``table[key]`` reads and writes the state of
the partition whose event is being handled, synchronously; the changes commit with that
event's acknowledgement (docs/state.md). Anywhere else, ``await table.get(key)`` reads the
committed value, and :meth:`Table.items` iterates a partition's.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import AsyncIterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from runnel.exceptions import Misconfigured, StateUnavailable, TableError, TransportError
from runnel.store.state import TableStore
from runnel.tables.codec import ValueCodec, decode_key, encode_key
from runnel.tables.partition import ABSENT, PartitionState, TableView, store_key

if TYPE_CHECKING:
    from runnel.interfaces import Serializer
    from runnel.record import Record
    from runnel.services import Services
    from runnel.store.log import PartitionId

current: ContextVar[PartitionState | None] = ContextVar("runnel_table_partition", default=None)
"""The partition whose event the running consumer task is handling (set per consumer)."""

_NOTHING: Any = object()
KEY_TYPES = (str, int, float)
"""Declared key types a table checks its keys against (others: only that they are JSON)."""


class Source(Protocol):
    """What a table uses of its source stream (:class:`runnel.Stream`)."""

    @property
    def name(self) -> str: ...

    @property
    def partition_count(self) -> int: ...

    def hash(self, key: Any) -> int: ...

    def partition_id(self, number: int) -> PartitionId: ...


class TableBase:
    """A map per partition of ``source``, keyed by the stream's partition keys (the
    plain :class:`~runnel.tables.Table` and the windowed ones)."""

    def __init__(
        self,
        app: Services,
        name: str,
        source: Source,
        default: Any,
        serializer: Serializer,
        record: type[Record] | None = None,
        registry: dict[str, Any] | None = None,
    ) -> None:
        self.app = app
        self.registry = registry
        """Where the app keeps its tables (a windowed table takes its base's place)."""
        self.replaced_by: TableBase | None = None
        self.name = name
        self.source = source
        self.default = default
        self.record = record
        self.codec = ValueCodec(serializer, record)
        self.writer: str | None = None
        """The processor that reads and writes it with ``[]`` (the first to do so)."""

    def __repr__(self) -> str:
        return f"<Table {self.name} of {self.source.name}>"

    @functools.cached_property
    def key_field(self) -> tuple[str, type] | None:
        """The source's partition key field and its type, when its records declare it as
        text or a number (``customer: str``); None when it is computed or of another type."""
        field = getattr(self.source, "partition_by", None)
        record = getattr(self.source, "record", None)
        if not isinstance(field, str) or record is None:
            return None
        declared = record.model_fields[field].annotation
        return (field, declared) if declared in KEY_TYPES else None

    def check_key(self, key: Any) -> None:
        """Refuse a key of the wrong type before it is routed: routed first, it would fail
        as a key of another partition or as one that cannot be stored, by its hash."""
        declared = self.key_field
        if declared is not None and not isinstance(key, declared[1]):
            field, expected = declared
            raise TableError(
                f"table {self.name!r} is keyed by {expected.__name__} (field {field!r} of "
                f"stream {self.source.name!r}), not {type(key).__name__}: {key!r}"
            )
        try:
            hash(key)
        except TypeError:
            raise TableError(
                f"table {self.name!r}: a key must be text, a number or a tuple of them, not "
                f"{type(key).__name__}: {key!r} (a list key can be made a tuple)"
            ) from None
        try:
            encode_key(key)
        except TableError as exc:
            raise TableError(f"table {self.name!r}: {exc}") from None

    # Inside the processor: the current partition's state, synchronously.

    def writes_here(self, processor: str) -> bool:
        """Whether ``processor`` writes this table: it claimed it, or it is the only
        processor of the source stream (a windowed table's clock runs from its first event)."""
        if self.writer is not None:
            return self.writer == processor
        readers = getattr(self.source, "readers", [])
        return list(readers) == [processor]

    def claim(self, processor: str) -> None:
        if self.writer is None:
            self.writer = processor
        elif self.writer != processor:
            raise TableError(
                f"table {self.name!r} is written by processor {self.writer!r}; processor "
                f"{processor!r} may read its committed values with await table.get(key)"
            )

    def _here(self, key: Any) -> tuple[PartitionState, TableView]:
        if self.replaced_by is not None:
            raise TableError(
                f"table {self.name!r} is windowed: use the table that made it so "
                f"({self.replaced_by!r})"
            )
        state = current.get()
        if state is None:
            raise TableError(
                f"table {self.name!r} is read and written with [] only inside the processor "
                f"of stream {self.source.name!r}; elsewhere, await table.get(key)"
            )
        view = state.views.get(self.name) or state.view(self)
        try:
            loaded = key in view.values  # a key loaded here was checked (or came with an event)
        except TypeError:  # unhashable: check() says what a key can be
            loaded = False
        if not loaded:
            state.check(self, key)
            view.stored(key)  # encoded now: one that cannot be fails its event, not a commit
        return state, view

    def __getitem__(self, key: Any) -> Any:
        state = current.get()
        if state is not None and self.replaced_by is None:  # the usual case: loaded
            view = state.views.get(self.name)
            if view is not None:
                values = view.values
                try:
                    value = values.get(key, _NOTHING)
                except TypeError:  # unhashable: _here() refuses it
                    value = _NOTHING
                if value is not _NOTHING and value is not ABSENT:
                    values.move_to_end(key)
                    view.hits += 1
                    return value
        state, view = self._here(key)
        if not view.loaded(key):
            self._load_now(state, view, key)
        return view.read(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        state = current.get()
        if state is not None and self.replaced_by is None and value is not ABSENT:
            view = state.views.get(self.name)
            if view is not None:
                values = view.values
                try:
                    known = key in values  # checked when it was loaded
                except TypeError:  # unhashable: _here() refuses it
                    known = False
                if known:
                    view.write(key, value)
                    state.changed = True
                    return
        state, view = self._here(key)
        if value is ABSENT:
            raise TableError("not a value")
        view.write(key, value)
        state.changed = True

    def __delitem__(self, key: Any) -> None:
        state, view = self._here(key)
        view.write(key, ABSENT)
        state.changed = True

    def __contains__(self, key: Any) -> bool:
        state, view = self._here(key)
        if not view.loaded(key):
            self._load_now(state, view, key)
        return view.values[key] is not ABSENT

    async def load(self, *keys: Any) -> None:
        """Inside the processor: load these keys of the current partition now, so that
        reading them with ``[]`` does not wait on the store (the keys of the events being
        handled are loaded before the processor gets them)."""
        state, view = self._here(keys[0]) if keys else (None, None)
        if state is None or view is None:
            return
        for key in keys[1:]:
            state.check(self, key)
        await state.load(view, [k for k in keys if not view.loaded(k)])

    def _load_now(self, state: PartitionState, view: TableView, *keys: Any) -> None:
        """Keys no event brought: read them from the store now. The event loop waits for
        that one round trip (in the app's portal thread), as ``delay_sync`` does."""
        if view.snapshot is not None:
            view.from_snapshot(keys)
            return
        try:
            raw = self.app.portal.call(
                lambda: self._store().get(
                    self.name, state.partition.id, [store_key(k) for k in keys]
                )
            )
        except TransportError as exc:
            raise StateUnavailable(
                f"the store failed a read of table {self.name!r}: {exc}"
            ) from exc
        for key, data in zip(keys, raw, strict=True):
            view.load(key, ABSENT if data is None else self.codec.decode(data))

    # Anywhere: committed values.

    def _store(self) -> TableStore:
        found = self.app.store.table_store(self.app.name)
        if found is None:
            raise Misconfigured(f"{type(self.app.store).__name__} keeps no tables")
        return found

    def partition_of(self, key: Any) -> int:
        return self.source.hash(key)

    async def get(self, key: Any, default: Any = _NOTHING) -> Any:
        """The committed value of ``key`` (the table's default, or ``default``, if absent)."""
        self.check_key(key)
        partition = self.source.partition_id(self.partition_of(key))
        [raw] = await self._store().get(self.name, partition, [encode_key(key)])
        if raw is None:
            return copy.deepcopy(self.default) if default is _NOTHING else default
        return self.codec.decode(raw)

    async def items(
        self, partition: int | None = None, page: int = 500
    ) -> AsyncIterator[tuple[Any, Any]]:
        """Every committed ``(key, value)`` of one partition (all of them when None), in no
        particular order; a key stored or deleted meanwhile may or may not appear."""
        store = self._store()
        numbers = range(self.source.partition_count) if partition is None else [partition]
        for number in numbers:
            cursor = b""
            while True:
                cursor, entries = await store.scan(
                    self.name, self.source.partition_id(number), cursor, page
                )
                for raw_key, raw in entries:
                    yield decode_key(raw_key), self.codec.decode(raw)
                if not cursor:
                    break

    async def clear(self, partitions: Sequence[int] | None = None) -> None:
        """Delete the committed state of these partitions (all when None). Only while no
        worker writes the table: an owner's cache would commit its values again."""
        store = self._store()
        if partitions is not None:
            await store.clear(self.name, [self.source.partition_id(n) for n in partitions])
            return
        # All of it: also the partitions past the stream's count when it was declared with
        # fewer than the table was built with, else they would outlive the count forgotten.
        built = (await store.partition_counts([self.name])).get(self.name, 0)
        first = self.source.partition_id(0)
        count = max(self.source.partition_count, built)
        await store.clear(self.name, [first._replace(number=n) for n in range(count)])
        await store.forget(self.name)

    async def sizes(self) -> dict[int, int]:
        """How many keys each partition holds (committed)."""
        ids = [self.source.partition_id(n) for n in range(self.source.partition_count)]
        found = await self._store().sizes(self.name, ids)
        return {p.number: n for p, n in found.items()}


async def check_partition_counts(store: TableStore, tables: Sequence[TableBase]) -> None:
    """Refuse tables whose source stream is declared with another partition count than
    the one they were built with: their keys would be looked for in the wrong partitions.
    The first check records the count."""
    recorded = await store.partition_counts([t.name for t in tables])
    wrong = []
    for table in tables:
        count = recorded.get(table.name)
        if count is None:
            count = await store.set_partition_count(table.name, table.source.partition_count)
        if count != table.source.partition_count:
            wrong.append((table, count))
    if wrong:
        names = ", ".join(repr(t.name) for t, _ in wrong)
        table, count = wrong[0]
        raise Misconfigured(
            f"stream {table.source.name!r} is declared with {table.source.partition_count} "
            f"partitions, but its tables {names} were built with {count}: their keys would "
            f"be looked for in the wrong partitions. Declare partition_count={count} again, "
            "or clear the tables first (runnel table clear)"
        )
