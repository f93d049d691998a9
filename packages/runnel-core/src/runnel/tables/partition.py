"""A partition's tables as its owner sees them: what it loaded, what it changed, and what
it has sent to be committed.

Reads and writes inside the processor are synchronous, on a cache of decoded values. When
an event's loop iteration finishes, its changes are *sealed*: no longer its own, they wait
in the view for the next commit of the partition, which takes them with the
acknowledgement of that event (encoded then, once per group commit). A value sealed but
not yet committed stays in the cache, so that a key is never read back
from the store older than what this owner has already made of it. A failed iteration's
changes are rolled back before the exception policy applies, so an event that is retried
or ignored has applied nothing. If the partition moves, everything here is dropped: the
next owner reads the committed values, which match the entries acknowledged.
"""

from __future__ import annotations

import copy
import sys
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from runnel.exceptions import TableError, WrongPartition
from runnel.plugins.instruments import finish, instruments
from runnel.store.state import Output, TableStore
from runnel.tables.codec import (
    IMMUTABLE,
    SCALARS,
    Encoded,
    RawKey,
    TakenDeadlines,
    TakenWrites,
    dumps,
    kept_key,
    store_key,
)

if TYPE_CHECKING:
    from runnel.metrics.stats import ProcessorStats
    from runnel.record import Record
    from runnel.tables.protocols import Clock, Sink, Table
    from runnel.types import Event, Partition

ABSENT: Any = object()
"""A key the store does not hold (reads give the table's default)."""
UNLOADED: Any = object()
"""Undo marker: the key was not loaded before this iteration changed it."""
KEYS_KEPT = 1024
"""Keys a view keeps encoded, at most (beyond the partition's share of the cache, none)."""
SNAPSHOT_MAX = 4096
"""A partition holding at most this many keys (and at most the view's share of the cache)
is read whole by its owner's first load, so that no key needs a read of its own later."""
REGROWN = 1.25
"""A cache this many times the memory it took when last copied has had its table regrown
by churn (see :meth:`TableView.compact`), not by more keys."""
CLEAN: Any = object()
"""Undo marker: the key had no change waiting to be committed before this iteration."""
_IMMUTABLE = IMMUTABLE


class CacheBudget:
    """The values of one table a processor keeps decoded in a worker, across the
    partitions it owns there: memory stays bounded whatever the number of keys or of
    partitions. Each partition's view keeps at most an equal share."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.views: set[TableView] = set()

    def share(self) -> int:
        return max(1, self.limit // max(1, len(self.views)))


class TableView:
    """One table on one partition: its cache and its changes.

    Changes accumulate in :attr:`dirty` until the acknowledger takes them for a commit
    (:meth:`take`, once per group commit, where they are encoded), so that an event costs
    a few dictionary operations. What the iteration in progress changed is also in
    :attr:`undo` and :attr:`undo_dirty`, so that a failure rolls back exactly its own
    changes, and a take made while it runs leaves them out."""

    def __init__(
        self,
        table: Table,
        partition: Partition,
        budget: CacheBudget,
        written: list[TableView] | None = None,
    ) -> None:
        self.table = table
        self.partition = partition
        self.budget = budget
        self.written = [] if written is None else written
        """Where the view puts itself when the iteration in progress first changes it (the
        partition's list: sealing visits only the views an iteration changed)."""
        budget.views.add(self)
        self.values: OrderedDict[Any, Any] = OrderedDict()
        self.compact_size = 0
        """The memory :attr:`values` took when last copied (:meth:`compact`)."""
        self.dirty: dict[Any, Any] = {}
        """Changes not yet taken: immutable values as they are, others :class:`Encoded`
        once sealed, :data:`ABSENT` for a deletion."""
        self.undo: dict[Any, Any] = {}
        """The iteration in progress: key -> its cached value before (:data:`UNLOADED`)."""
        self.undo_dirty: dict[Any, Any] = {}
        """The iteration in progress: key -> its entry in :attr:`dirty` before (:data:`CLEAN`)."""
        self.sealed: list[tuple[int, dict[Any, Any]]] = []
        """The changes taken for commits not yet done, with their take numbers: their keys
        are not evicted until then."""
        self.keys: dict[Any, bytes] = {}
        """Keys as stored (encoded once; at most :data:`KEYS_KEPT`)."""
        self.mutable = False
        """Whether the iteration in progress wrote a value that may change in place or
        may not encode (to encode as it is when sealed: :meth:`prepare`)."""
        self.hits = 0
        self.misses = 0
        self.snapshot: dict[bytes, bytes] | None = None
        """Stored key -> committed value, of every entry of the partition not yet loaded
        into the cache, when the first load read them all (the partition held few): a key
        in neither is not stored, so needs no read. Dropped at the first eviction."""
        self.probed = False
        """Whether a load asked the store for everything (it does once)."""
        # Deadlines (windowed tables): what this owner set and the store may not have yet.
        self.deadlines: dict[Any, float | None] = {}
        self.deadline_undo: dict[Any, Any] = {}
        self.due: dict[Any, None] = {}
        """Keys whose deadline sealed iterations changed, not yet taken."""
        self.deadline_seq: dict[Any, int] = {}
        self.epoch = 0
        """Counts commits that completed (a read of the store's deadlines that spans one
        may be older than what this owner dropped from :attr:`deadlines`)."""
        # Late events and closed windows (windowed tables), counted for the metrics once
        # committed: this iteration's, sealed ones not taken, taken ones by take number,
        # and committed ones.
        self.late = 0
        self.closed = 0
        self.sealed_late = 0
        self.sealed_closed = 0
        self.taken_counts: list[tuple[int, int, int]] = []
        self.committed_late = 0
        self.committed_closed = 0
        codec = table.codec
        self._encode, self._frozen = codec.encode, codec.frozen
        self._plain = codec.plain_json
        self._records = codec.record is not None  # every value is validated when sealed

    def loaded(self, key: Any) -> bool:
        return key in self.values

    def read(self, key: Any) -> Any:
        try:
            value = self.values[key]
        except KeyError:
            raise KeyError(key) from None
        self.values.move_to_end(key)
        self.hits += 1
        if value is ABSENT:
            default = self.table.default
            return default if isinstance(default, _IMMUTABLE) else copy.deepcopy(default)
        return value

    def write(self, key: Any, value: Any) -> None:
        undo, values = self.undo, self.values
        if key not in undo:
            if not undo:
                self.written.append(self)
            undo[key] = values.get(key, UNLOADED)
            self.undo_dirty[key] = self.dirty.get(key, CLEAN)
        values[key] = value
        values.move_to_end(key)
        self.dirty[key] = value
        kind = type(value)  # codec.deferrable, inlined: a counter's every write passes here
        if self._records or not (
            (kind is int and -0x8000000000000000 <= value <= 0xFFFFFFFFFFFFFFFF)
            or (kind is float and not value - value)  # not NaN, not an infinity
            or (kind is str and value.isascii())
            or kind is bool
            or value is None
        ):
            self.mutable = True

    def set_deadline(self, key: Any, when: float | None) -> None:
        if key not in self.deadline_undo:
            self.deadline_undo[key] = self.deadlines.get(key, UNLOADED)
        self.deadlines[key] = when

    def load(self, key: Any, value: Any) -> None:
        """A committed value read from the store (never over a change of ours)."""
        if key not in self.values:
            self.values[key] = value
            self.misses += 1

    def from_snapshot(self, keys: Iterable[Any]) -> None:
        """Load keys from :attr:`snapshot` (which must be there): no store read."""
        snapshot, decode, values = self.snapshot, self.table.codec.decode, self.values
        assert snapshot is not None
        for key in keys:
            if key not in values:
                data = snapshot.pop(self.stored(key), None)  # the commit wants it encoded too
                values[key] = ABSENT if data is None else decode(data)
                self.misses += 1

    def prepare(self) -> None:
        """Encode this iteration's mutable values as they are now, so that later changes
        in place do not reach the commit, and a value that cannot be encoded fails the
        event that made it. Immutable ones that surely encode wait to be taken (the last
        of several changes of a key only). Undone by :meth:`rollback`, like the changes."""
        self.mutable = False
        dirty, encode, frozen = self.dirty, self._encode, self._frozen
        for key in self.undo:
            value = dirty[key]
            if value is ABSENT or type(value) is Encoded or frozen(value):
                continue
            dirty[key] = Encoded(encode(value))

    def seal(self) -> None:
        """The iteration finished: its changes are no longer its own (see :meth:`take`)."""
        if self.undo:
            self.undo.clear()
            self.undo_dirty.clear()
        self.seal_clock()

    def seal_clock(self) -> None:
        """:meth:`seal` of what a windowed table's clock changed: deadlines and counts."""
        if self.deadline_undo:
            self.due.update(dict.fromkeys(self.deadline_undo))
            self.deadline_undo.clear()
        if self.late or self.closed:
            self.sealed_late += self.late
            self.sealed_closed += self.closed
            self.late = self.closed = 0

    def take(self, seq: int) -> tuple[dict[bytes, bytes | None], dict[bytes, float | None]]:
        """The sealed changes, encoded for a commit (take number ``seq``), and the sealed
        deadlines; the iteration in progress keeps its own."""
        dirty, undo_dirty = self.dirty, self.undo_dirty
        if undo_dirty:
            mine = {}
            for key, before in undo_dirty.items():
                mine[key] = dirty.pop(key)
                if before is not CLEAN:
                    dirty[key] = before
                undo_dirty[key] = CLEAN  # what it had before goes with this take
            self.dirty = mine
        else:
            self.dirty = {}
        writes: dict[bytes, bytes | None] = {}
        if dirty:
            encode, key_of, kept = self._encode, self.stored, self.keys
            scalar = dumps if self._plain else None
            for key, value in dirty.items():
                kind = type(value)
                writes[kept.get(key) or key_of(key)] = (
                    scalar(value)
                    if scalar is not None and kind in SCALARS
                    else None
                    if value is ABSENT
                    else value.data
                    if kind is Encoded
                    else encode(value)
                )
            self.sealed.append((seq, dirty))
        whens: dict[bytes, float | None] = {}
        if self.due:
            due, self.due = self.due, {}
            deadlines, undo, key_of = self.deadlines, self.deadline_undo, self.stored
            for key in due:
                whens[key_of(key)] = undo[key] if key in undo else deadlines[key]
            self.deadline_seq.update(dict.fromkeys(due, seq))
        if self.sealed_late or self.sealed_closed:
            self.taken_counts.append((seq, self.sealed_late, self.sealed_closed))
            self.sealed_late = self.sealed_closed = 0
        return writes, whens

    def stored(self, key: Any) -> bytes:
        """A key as the store keeps it (encoded once while it stays cached)."""
        found = self.keys.get(key)
        if found is None:
            found = key if type(key) is RawKey else kept_key(key)
            if len(self.keys) >= min(KEYS_KEPT, self.budget.share()):
                self.keys.clear()  # crude, but memory stays bounded and hot keys return
            self.keys[key] = found
        return found

    def rollback(self) -> None:
        for key, before in self.undo.items():
            if before is UNLOADED:
                self.values.pop(key, None)
            else:
                self.values[key] = before
        dirty = self.dirty
        for key, before in self.undo_dirty.items():
            if before is CLEAN:
                dirty.pop(key, None)
            else:
                dirty[key] = before
        for key, before in self.deadline_undo.items():
            if before is UNLOADED:
                self.deadlines.pop(key, None)
            else:
                self.deadlines[key] = before
        self.late = self.closed = 0
        self.mutable = False
        self.undo.clear()
        self.undo_dirty.clear()
        self.deadline_undo.clear()

    def committed(self, seq: int) -> bool:
        """Changes taken up to ``seq`` are in the store: their keys may be evicted
        (True if some were)."""
        self.epoch += 1
        while self.taken_counts and self.taken_counts[0][0] <= seq:
            _, late, closed = self.taken_counts.pop(0)
            self.committed_late += late
            self.committed_closed += closed
        sealed = self.sealed
        if sealed and sealed[0][0] <= seq:
            self.sealed = [taken for taken in sealed if taken[0] > seq]
        if self.deadline_seq:
            done = [k for k, s in self.deadline_seq.items() if s <= seq]
            for key in done:
                del self.deadline_seq[key]
                if key not in self.deadline_undo and key not in self.due:
                    self.deadlines.pop(key, None)
        excess = len(self.values) - self.budget.share()
        if excess <= 0:
            return False
        dirty, values = self.dirty, self.values
        pending = [taken for _, taken in self.sealed]
        self.snapshot = None  # an evicted key would read as not stored
        evicted = []
        for key in values:  # least recently used first
            if key not in dirty and not any(key in taken for taken in pending):
                evicted.append(key)
                if len(evicted) == excess:
                    break
        for key in evicted:
            del values[key]
        self.compact()
        return True

    def compact(self) -> None:
        """Copy the cache when evicting and loading made its table regrow. A dict never
        reuses a deleted key's slot: once they run out it resizes to three times the keys
        it holds, twice what the same keys take when inserted once (a copy, in the same
        order). Measured 16 partitions of 6,250 keys: 8.6 MB filled, 14.0 MB churned."""
        values = self.values
        size = sys.getsizeof(values)
        if size > self.compact_size * REGROWN:
            self.values = OrderedDict(values)
            self.compact_size = sys.getsizeof(self.values)


class PartitionState:
    """Every table of a stream on one partition, for the processor that owns it there."""

    def __init__(
        self,
        partition: Partition,
        tables: Sequence[Table],
        store: TableStore,
        processor: str,
        limit: int,
        stats: ProcessorStats | None = None,
        budgets: dict[str, CacheBudget] | None = None,
    ) -> None:
        self.stats = stats
        self.partition = partition
        self.tables = list(tables)
        self.store = store
        self.processor = processor
        self.limit = limit
        self.budgets = {} if budgets is None else budgets
        """Per table, shared by the partitions of this processor in this worker."""
        self.views: dict[str, TableView] = {}
        self.shrunk = 0
        """Counts the times the cache may have lost a key (an eviction, a rollback, a new
        view): the consumer checks then that the keys of its buffered events are loaded."""
        self.written: list[TableView] = []
        """The views the iteration in progress changed (each once)."""
        self.outputs: list[Output] = []
        """What the iteration in progress sent (:meth:`runnel.Events.send`)."""
        self.seq = 0
        self.changed = False
        by = getattr(partition.stream, "partition_by", None)
        self.key_of = attrgetter(by) if isinstance(by, str) else partition.stream.key_of
        """An event's key (a field's getter when keyed by a field: one call, per event)."""
        self.event: Event | None = None
        """The event being handled one at a time (None in a ``take()`` batch)."""
        self.clocks: dict[str, Clock] = {}
        """The clocks of the windowed tables this processor writes, by table."""
        for table in self.tables:
            if table.writes_here(processor):  # its keys are loaded with the events from the start
                self.view(table)
                if getattr(table, "kind", None) is not None:
                    self.clock(table)

    def view(self, table: Table) -> TableView:
        found = self.views.get(table.name)
        if found is None:
            table.claim(self.processor)
            budget = self.budgets.get(table.name)
            if budget is None:
                budget = self.budgets[table.name] = CacheBudget(self.limit)
            found = self.views[table.name] = TableView(table, self.partition, budget, self.written)
            self.shrunk += 1
        return found

    def attach(self) -> None:
        """The partition is processed here (again): its views count against the budgets."""
        for view in self.views.values():
            view.budget.views.add(view)

    def detach(self) -> None:
        """The partition is no longer processed here: its views leave the budgets (the
        cache goes with this object when the partition moves)."""
        for view in self.views.values():
            view.budget.views.discard(view)

    def clock(self, table: Any) -> Clock:
        """A windowed table's clock here (made, and the table claimed, on first use)."""
        found = self.clocks.get(table.name)
        if found is None:
            found = self.clocks[table.name] = table.clock(self, self.view(table))
        return found

    def before_now(self, events: list[Event]) -> bool:
        """:meth:`before` when no clock needs to wait (True), else False: call it."""
        for clock in self.clocks.values():
            if not clock.before_now(events):
                return False
        return True

    def after_now(self, events: list[Event]) -> bool:
        """:meth:`after` when no clock needs to wait (True), else False: call it."""
        self.event = None
        done = True
        for clock in self.clocks.values():
            done = clock.after_now(events) and done
        return done

    async def before(self, events: list[Event]) -> None:
        """An iteration starts on ``events``: the clocks find the late ones."""
        for clock in self.clocks.values():
            await clock.before(events)

    async def after(self, events: list[Event]) -> None:
        """An iteration finished ``events``: the clocks move and close windows."""
        self.event = None
        for clock in self.clocks.values():
            await clock.after(events)

    async def send_records(self, stream: Sink, records: Sequence[Record | dict[str, Any]]) -> None:
        """Records to send with this iteration's commit (:meth:`runnel.Events.send`)."""
        if stream.has_schemas:
            await stream.prepare(writing=True)
        cap = stream.partition_size
        entries = stream.entries(records)
        sending = instruments().sending
        if sending is not None:  # a plugin (tracing) sees them; they go out with the commit
            finish(sending(stream=stream, entries=entries), None, None)
        self.send((p, fields, cap) for p, fields in entries)

    def check(self, table: Table, key: Any) -> None:
        """A key of this partition, of a table of this stream, else a clear error."""
        if table.source is not self.partition.stream:
            raise TableError(
                f"table {table.name!r} is kept per partition of stream {table.source.name!r}, "
                f"not of {self.partition.stream.name!r} whose event is being handled"
            )
        table.check_key(key)
        number = table.source.hash(key)
        if number != self.partition.number:
            raise WrongPartition(
                f"key {key!r} of table {table.name!r} belongs to partition {number} of stream "
                f"{table.source.name!r}, but this event came from partition "
                f"{self.partition.number}: a processor reads and writes the keys of its own "
                "partition only (await table.get(key) reads any committed value)"
            )

    # Loading.

    def keys_of(self, events: Iterable[Event]) -> list[Any]:
        out = []
        key_of = self.key_of
        for event in events:
            try:
                key = key_of(event.record)
                hash(key)
            except Exception:  # undecodable, or no key: the processor's policy deals with it
                continue
            out.append(key)
        return out

    def missing(self, events: Iterable[Event]) -> bool:
        """Whether the key of one of ``events`` is not loaded in a table this processor
        uses (keys the partition's snapshot holds are loaded from it now)."""
        views = list(self.views.values())
        if not views:  # a partition that only sends (events.send), keyed or not
            return False
        key_of = self.key_of
        for event in events:
            try:
                key = key_of(event._record or event.record)
                hash(key)  # a key no table holds fails in the processor, where it is read
            except Exception:  # undecodable, or no key: the processor's policy deals with it
                continue
            for view in views:
                if key not in view.values:
                    if view.snapshot is None:
                        return True
                    view.from_snapshot((key,))
        return False

    async def prefetch(self, events: Iterable[Event]) -> None:
        """Load the keys of ``events`` in every table this processor uses (one store call
        per table for all of them)."""
        keys = list(dict.fromkeys(self.keys_of(events)))
        for view in self.views.values():
            await self.load(view, [k for k in keys if not view.loaded(k)])

    async def load(self, view: TableView, keys: Sequence[Any]) -> None:
        if not keys:
            return
        if view.snapshot is not None:
            view.from_snapshot(keys)
            return
        name, stored = view.table.name, [store_key(k) for k in keys]
        if view.probed:
            raw = await self.store.get(name, self.partition.id, stored)
        else:  # the first load: everything, if the partition holds few keys
            limit, epoch = min(SNAPSHOT_MAX, view.budget.share()), view.epoch
            raw, every = await self.store.get_small(name, self.partition.id, stored, limit)
            view.probed = True
            if every is not None and view.epoch == epoch:  # no eviction since the read
                for key in stored:
                    every.pop(key, None)
                view.snapshot = every
        decode = view.table.codec.decode
        for key, data in zip(keys, raw, strict=True):
            view.load(key, ABSENT if data is None else decode(data))

    # Committing.

    def seal(self) -> None:
        """This iteration finished: its changes join those its acknowledgement will
        commit. Raises (having sealed nothing) on a value that cannot be encoded."""
        written = self.written
        if written:
            for view in written:  # all encoded before anything is sealed
                if view.mutable:
                    view.prepare()
            for view in written:
                view.undo.clear()
                view.undo_dirty.clear()
            written.clear()
        self.changed = False
        if self.clocks:
            for view in self.views.values():
                if view.deadline_undo or view.late or view.closed:
                    view.seal_clock()

    def take(self) -> tuple[int, TakenWrites, TakenDeadlines]:
        """What the finished iterations changed, encoded for a commit, with the number
        that :meth:`committed` is told once it is done."""
        seq = self.seq = self.seq + 1
        writes: TakenWrites = {}
        deadlines: TakenDeadlines = {}
        for name, view in self.views.items():
            if view.dirty or view.due or view.sealed_late or view.sealed_closed:
                values, whens = view.take(seq)
                if values:
                    writes[name] = values
                if whens:
                    deadlines[name] = whens
        return seq, writes, deadlines

    def send(self, outputs: Iterable[Output]) -> None:
        """Entries for the iteration in progress to send when it commits."""
        self.outputs += outputs
        self.changed = True

    def take_outputs(self) -> list[Output]:
        outputs, self.outputs = self.outputs, []
        return outputs

    def rollback(self) -> None:
        """The iteration failed: undo its changes (the policy decides what happens next)."""
        self.changed = False
        self.outputs = []
        self.event = None
        self.shrunk += 1
        self.written.clear()
        for view in self.views.values():
            view.rollback()
        for clock in self.clocks.values():
            clock.rolled_back()

    def committed(self, seq: int, tables: Iterable[str] = ()) -> None:
        """Changes taken up to ``seq`` are in the store (their commit wrote ``tables``)."""
        for view in self.views.values():
            if view.committed(seq):
                self.shrunk += 1
        stats = self.stats
        if stats is not None:
            for name in tables:
                stats.table(name).commits += 1
            for name, view in self.views.items():
                found = stats.table(name)
                found.hits, view.hits = found.hits + view.hits, 0
                found.misses, view.misses = found.misses + view.misses, 0
                found.late, view.committed_late = found.late + view.committed_late, 0
                found.closed, view.committed_closed = found.closed + view.committed_closed, 0
