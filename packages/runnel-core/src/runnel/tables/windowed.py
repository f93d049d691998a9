"""Windowed tables: ``app.table(...).tumbling(60)`` and its kin (docs/state.md, "Windows").

Inside the processor, ``per_minute[key]`` is the key's windows *at the event being
handled*: ``per_minute[key] += amount`` changes each open window that event is in, and
``per_minute[key].current()`` reads the value of its window. Outside, ``await
per_minute.get(key, at=...)`` and ``await per_minute.windows(key)`` read committed windows.
What a window holds is stored per key with the window bounds; the partition's clock
(:mod:`runnel.tables.clock`) closes, emits and expires windows as event time passes.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import operator
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import msgpack

from runnel.exceptions import Misconfigured, TableError
from runnel.record import Record
from runnel.tables.base import _NOTHING, TableBase, current
from runnel.tables.clock import META, Clock, KeyedClock, Meta, entry_time_of
from runnel.tables.codec import IMMUTABLE, ValueCodec, decode_key, deferrable, encode_key
from runnel.tables.partition import PartitionState
from runnel.tables.windows import NEVER, KeyWindows, Kind, Window
from runnel.types import Event

if TYPE_CHECKING:
    from runnel.interfaces import Serializer
    from runnel.store.log import PartitionId
    from runnel.stream import Stream

EventTime = str | Callable[[Any], Any] | None
"""Where an event's time comes from: a record field, a function of the record, or (None)
the entry's own timestamp. A number is seconds since the epoch; a datetime is converted."""


class WindowClosed(Record):
    """What a window's close emits to ``on_close``: the table, the key, the window's
    bounds (seconds of event time) and its final value."""

    table: str
    key: Any
    start: float
    end: float
    value: Any


def seconds(value: Any) -> float:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, int | float) or value - value != 0:
        # (a NaN or an infinity minus itself is NaN: no window holds it)
        raise TableError(
            f"an event time must be a finite number of seconds or a datetime: {value!r}"
        )
    return float(value)


def entry_time(xid: bytes) -> float:
    """An entry id's own timestamp (milliseconds before the ``-``), in seconds."""
    ms, _, _ = xid.partition(b"-")
    return int(ms) / 1000


class WindowsCodec(ValueCodec):
    """A key's windows (each value through the table's serializer) and the partition's
    clock, as msgpack."""

    def __init__(self, serializer: Serializer, record: type[Record] | None) -> None:
        super().__init__(serializer, record)
        # One packer, not one per value as msgpack.packb makes: what it packs here is
        # numbers, bytes and lists of them, done in one call that runs no Python code.
        self._pack = msgpack.Packer().pack

    def encode(self, value: Any) -> bytes:
        pack = self._pack
        if type(value) is Meta:
            return pack([0, value.watermark, value.late])
        inner = ValueCodec.encode
        items = value.items
        n = len(items)
        if n == 1:  # the usual case
            s, e, v = items[0]
            return pack([1, value.closed_upto, [[s, e, inner(self, v)]]])
        if n < KEEP_FROM:  # a few: at once is quicker than keeping some
            return pack([1, value.closed_upto, [[s, e, inner(self, v)] for s, e, v in items]])
        head = value.head
        done, data = (0, b"") if head is None else head
        if done < n - 1:  # older windows not encoded yet: encode them once, if immutable
            older = items[done:-1]
            if not _immutable(older):  # may change in place: encoded each time
                return pack([1, value.closed_upto, [[s, e, inner(self, v)] for s, e, v in items]])
            packed = pack([[s, e, inner(self, v)] for s, e, v in older])
            data += packed[len(_array_header(len(older))) :]  # one call, without its header
            value.head = (n - 1, data)
        # The same bytes as packing [1, closed_upto, items]: a msgpack array is its header
        # and then its elements, each packed alone.
        s, e, v = items[-1]
        return b"".join(
            (
                _KEYWINDOWS,
                pack(value.closed_upto),
                _array_header(n),
                data,
                pack([s, e, inner(self, v)]),
            )
        )

    def frozen(self, value: Any) -> bool:
        if type(value) is Meta:
            return True
        items = value.items
        if not items:
            return True
        if self.record is not None or not deferrable(items[-1][2]):
            return False
        head = value.head  # the items it holds are encoded
        if len(items) == 1 or (head is not None and head[0] == len(items) - 1):
            return True
        return all(deferrable(v) for _, _, v in items[0 if head is None else head[0] : -1])

    def decode(self, data: bytes) -> Any:
        found = msgpack.unpackb(data)
        if found[0] == 0:
            return Meta(found[1], found[2])
        inner = super().decode
        return KeyWindows(tuple((s, e, inner(v)) for s, e, v in found[2]), found[1])


KEEP_FROM = 8
"""A key holding at least this many windows keeps the stored form of its older ones
(fewer are encoded as quickly at once as in parts)."""
_KEYWINDOWS = b"\x93\x01"
"""The start of a key's windows as msgpack: an array of three, the first 1."""


def _array_header(n: int) -> bytes:
    if n < 16:
        return bytes((0x90 | n,))
    if n < 0x10000:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def _immutable(items: Sequence[tuple[float, float, Any]]) -> bool:
    for item in items:
        if not isinstance(item[2], IMMUTABLE):
            return False
    return True


class WindowedTable(TableBase):
    """A table whose values are kept per window of event time (made by
    :meth:`Table.tumbling`, :meth:`~Table.hopping`, :meth:`~Table.sliding` or
    :meth:`~Table.session`)."""

    def __init__(
        self,
        base: TableBase,
        kind: Kind,
        *,
        grace: float = 0.0,
        expires: float | None = None,
        time: EventTime = None,
        late: Stream | str = "drop",
        on_close: Stream | Callable[[WindowClosed], Any] | None = None,
    ) -> None:
        super().__init__(
            base.app,
            base.name,
            base.source,
            base.default,
            base.codec.serializer,
            registry=base.registry,
        )
        self.record = base.record
        self.codec = WindowsCodec(base.codec.serializer, base.record)
        self.kind = kind
        if grace < 0:
            raise Misconfigured(f"table {self.name!r}: grace must be >= 0")
        self.grace = float(grace)
        self.expires = self.grace if expires is None else float(expires)
        if self.expires < self.grace:
            raise Misconfigured(f"table {self.name!r}: expires ({expires}) is shorter than grace")
        if time is not None and not (isinstance(time, str) or callable(time)):
            raise Misconfigured(f"table {self.name!r}: time must be a field name or a function")
        self.time = time
        self.late_stream: Stream | None = None
        if late != "drop":
            if not hasattr(late, "entries"):
                raise Misconfigured(
                    f"table {self.name!r}: late is 'drop' or a Stream, not {late!r}"
                )
            self.late_stream = late  # type: ignore[assignment]
        self.on_close = on_close

    def __repr__(self) -> str:
        return f"<WindowedTable {self.name} of {self.source.name}: {self.kind}>"

    def time_of(self, event: Event) -> float:
        """The event time of an event, per the table's ``time``."""
        if self.time is None:
            return entry_time(event.xid)
        return self.record_time(event.record)

    @property
    def event_time(self) -> Callable[[Event], float]:
        """:meth:`time_of` as the quickest function that computes it."""
        return entry_time_of if self.time is None else self.time_of

    def record_time(self, record: Any) -> float:
        if self.time is None:
            raise TableError(
                f"table {self.name!r} takes event times from entry ids: give the Event, "
                "not its record"
            )
        try:
            raw = getattr(record, self.time) if isinstance(self.time, str) else self.time(record)
        except Exception as exc:
            raise TableError(
                f"table {self.name!r} cannot take the event time of {record!r}"
            ) from exc
        return seconds(raw)

    # Inside the processor.

    def clock(self, state: PartitionState, view: Any) -> Clock:
        """This table's clock on a partition (see :meth:`PartitionState.clock`)."""
        if self.kind.late_by_key:
            return KeyedClock(self, state, view)
        return Clock(self, state, view)

    def _at(self, key: Any, when: Any) -> WindowedValue:
        state, view = self._here(key)
        clock = cast(Clock, state.clocks.get(self.name) or state.clock(self))
        if META not in view.values:
            self._load_now(state, view, META)
        if when is None:
            event = state.event
            if event is None:
                raise TableError(
                    f"table {self.name!r}: in a take() batch, say which event a window is "
                    f"for: {self.name}.at(event)[key]"
                )
            t, late = clock.time_of(event), clock.lateness(event.xid)
        elif isinstance(when, Event):
            t, late = clock.time_of(when), clock.lateness(when.xid)
        else:
            t = seconds(when) if not isinstance(when, Record) else self.record_time(when)
            late = clock.time_late(t)
        if key not in view.values:
            self._load_now(state, view, key)
        return WindowedValue(self, clock, key, t, late)

    def __getitem__(self, key: Any) -> WindowedValue:
        state = current.get()
        if state is not None:  # the usual case: the key and the clock loaded, one event
            clock: Clock | None = state.clocks.get(self.name)  # type: ignore[assignment]
            event = state.event
            if clock is not None and event is not None:
                values = clock.view.values
                xid = event.xid
                t = clock.times.get(xid)
                try:
                    known = key in values
                except TypeError:  # unhashable: _at() refuses it
                    known = False
                if t is not None and known and META in values and xid not in clock.late:
                    return WindowedValue(self, clock, key, t, False)
        return self._at(key, None)

    def __setitem__(self, key: Any, value: Any) -> None:
        if type(value) is WindowedValue or isinstance(value, WindowedValue):
            return  # ``table[key] += 1`` applied it already
        self._at(key, None).set(value)

    def __delitem__(self, key: Any) -> None:
        found = self._at(key, None)
        found.clock.store(key, None)

    def __contains__(self, key: Any) -> bool:
        found = self._at(key, None)
        return self.kind.holds(found.clock.windows_of(key))

    def at(self, when: Any) -> At:
        """The windows at another time than the event's: an :class:`~runnel.Event` (in a
        ``take()`` batch), a record (with ``time=`` set), seconds or a datetime."""
        return At(self, when)

    async def emit(self, state: PartitionState, closed: Sequence[tuple[Any, Window, Any]]) -> None:
        """Closed windows to ``on_close``: a stream (sent with the commit: exactly once)
        or a function (called now: at least once)."""
        target = self.on_close
        if target is None:
            return
        made: list[Record] = [
            WindowClosed(table=self.name, key=k, start=w.start, end=w.end, value=v)
            for k, w, v in closed
        ]
        if callable(target):
            for one in made:
                found = target(one)  # type: ignore[arg-type]
                if asyncio.iscoroutine(found):
                    await found
            return
        record = target.record
        if record is not WindowClosed:
            made = [record.model_validate(m.model_dump()) for m in made]
        await state.send_records(target, made)

    # Anywhere: committed windows.

    async def _windows(self, key: Any) -> KeyWindows:
        self.check_key(key)
        partition = self.source.partition_id(self.partition_of(key))
        [raw] = await self._store().get(self.name, partition, [encode_key(key)])
        return KeyWindows() if raw is None else self.codec.decode(raw)

    async def get(self, key: Any, default: Any = _NOTHING, *, at: Any = None) -> Any:
        """The committed value of ``key``'s window at ``at`` (seconds or a datetime), or
        of its latest window; the table's default (or ``default``) if there is none."""
        kw = await self._windows(key)
        missing = copy.deepcopy(self.default) if default is _NOTHING else default
        if at is None:
            held = self.kind.windows(kw)
            return held[-1][1] if held else missing
        return self.kind.current(kw, seconds(at), missing)

    async def windows(
        self, key: Any, since: Any = None, until: Any = None
    ) -> list[tuple[Window, Any]]:
        """``key``'s committed windows starting in ``[since, until)``, by start."""
        return _between(self.kind.windows(await self._windows(key)), since, until)

    async def items(
        self, partition: int | None = None, page: int = 500
    ) -> AsyncIterator[tuple[Any, list[tuple[Window, Any]]]]:
        """Every key of one partition (all when None) with its windows."""
        store = self._store()
        numbers = range(self.source.partition_count) if partition is None else [partition]
        for number in numbers:
            cursor = b""
            while True:
                cursor, entries = await store.scan(
                    self.name, self.source.partition_id(number), cursor, page
                )
                for raw_key, raw in entries:
                    if raw_key != META:
                        held = self.kind.windows(self.codec.decode(raw))
                        if held:  # (a sliding key may hold only events later windows hold)
                            yield decode_key(raw_key), held
                if not cursor:
                    break

    async def clock_of(self, partition: PartitionId) -> Meta | None:
        """A partition's watermark and late count, as committed (None: no event yet)."""
        [raw] = await self._store().get(self.name, partition, [META])
        return None if raw is None else cast(Meta, self.codec.decode(raw))

    async def clocks(self) -> dict[int, Meta]:
        """Each partition's watermark and late count, as committed."""
        out = {}
        for number in range(self.source.partition_count):
            found = await self.clock_of(self.source.partition_id(number))
            out[number] = Meta() if found is None else found
        return out

    async def sizes(self) -> dict[int, int]:
        """How many keys each partition holds windows for."""
        found = await super().sizes()
        clocks = await self.clocks()
        return {n: k - (clocks[n] != Meta()) for n, k in found.items()}

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind.name, **self.kind.describe(), "grace": self.grace}


def _between(held: list[tuple[Window, Any]], since: Any, until: Any) -> list[tuple[Window, Any]]:
    low = NEVER if since is None else seconds(since)
    high = float("inf") if until is None else seconds(until)
    return [(w, v) for w, v in held if low <= w.start < high]


class At:
    """``table.at(when)``: the windows of keys at that time."""

    def __init__(self, table: WindowedTable, when: Any) -> None:
        self.table = table
        self.when = when

    def __getitem__(self, key: Any) -> WindowedValue:
        return self.table._at(key, self.when)

    def __setitem__(self, key: Any, value: Any) -> None:
        if not isinstance(value, WindowedValue):
            self.table._at(key, self.when).set(value)


def _call(value: Any, change: Callable[[Any], Any]) -> Any:
    return change(value)


def _inplace(op: Callable[[Any, Any], Any]) -> Callable[[WindowedValue, Any], WindowedValue]:
    def apply(self: WindowedValue, other: Any) -> WindowedValue:
        if not self.late:  # as update() does, one call less
            self.clock.change(self.key, self.time, op, other)
        elif self.late is not True:  # an event id: judged by the session it joins
            self.clock.join(self.late, self.key, self.time, op, other)
        return self

    return apply


class WindowedValue:
    """A key's windows at one event time, inside the processor. Changing it changes each
    open window that time is in; a late event's changes are dropped (it was counted).
    ``late`` is False, True, or (a session event whose own session would be closed) the
    event's id: its change is made if it joins an open session, and then it is on time."""

    __slots__ = ("clock", "key", "late", "table", "time")

    def __init__(
        self, table: WindowedTable, clock: Clock, key: Any, t: float, late: bool | bytes
    ) -> None:
        self.table = table
        self.clock = clock
        self.key = key
        self.time = t
        self.late = late

    def __repr__(self) -> str:
        return f"<{self.table.name}[{self.key!r}] at {self.time}: {self.current()!r}>"

    def update(self, change: Callable[[Any], Any]) -> None:
        """Apply ``change`` (old value -> new value) to each open window of this time."""
        if not self.late:
            self.clock.change(self.key, self.time, _call, change)
        elif self.late is not True:
            self.clock.join(self.late, self.key, self.time, _call, change)

    def set(self, value: Any) -> None:
        self.update(lambda _: value)

    def current(self) -> Any:
        """The value of this time's window (the latest, if several hold it)."""
        kw = self.clock.windows_of(self.key)
        return self.table.kind.current(kw, self.time, self.table.default)

    def windows(self, since: Any = None, until: Any = None) -> list[tuple[Window, Any]]:
        """The key's windows starting in ``[since, until)``, by start (open and closed)."""
        return _between(self.table.kind.windows(self.clock.windows_of(self.key)), since, until)

    __iadd__ = _inplace(operator.add)
    __isub__ = _inplace(operator.sub)
    __imul__ = _inplace(operator.mul)
    __itruediv__ = _inplace(operator.truediv)
    __ifloordiv__ = _inplace(operator.floordiv)
    __imod__ = _inplace(operator.mod)
    __ior__ = _inplace(operator.or_)
    __iand__ = _inplace(operator.and_)
    __ixor__ = _inplace(operator.xor)


__all__ = ["At", "WindowClosed", "WindowedTable", "WindowedValue"]
