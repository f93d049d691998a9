"""A windowed table's event-time clock on one partition: its watermark, late events, and
the windows it closes.

Per iteration of the processor (an event, or a ``take()`` batch), the partition's state
asks each clock twice. :meth:`Clock.before`: which of the events are late (every window
they would be in is closed), counted, and sent to the late stream if there is one. (A
session event may join an open session of the key it changes even when its own session
would be closed: :class:`KeyedClock` counts it late after the iteration, if none of its
changes did.)
:meth:`Clock.after`: the watermark moves to the latest event time seen, and the keys whose
windows that closes or expires are handled: each closed window emitted once, expired
ones deleted. All of it is written like any change of the iteration, so it commits with
the acknowledgement of its events: a watermark, a late count and an emission are each
exactly-once too.

Finding the keys: each key with windows has a *deadline* in the store (its next window's
close or expiry), kept ordered there; this owner's changes not yet committed are in the
table view's :attr:`~runnel.tables.partition.TableView.deadlines` and win over the store's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from runnel.tables.codec import decode_key
from runnel.tables.partition import ABSENT, RawKey, TableView
from runnel.tables.windows import NEVER, KeyWindows, Window, close, deadline, same_bounds

if TYPE_CHECKING:
    from runnel.tables.partition import PartitionState
    from runnel.tables.protocols import Sink
    from runnel.tables.windows import Kind
    from runnel.types import Event

META = RawKey(b"\x00meta")
"""The key of a partition's clock in its table (never a stream key: those are JSON)."""

EMPTY = KeyWindows()
"""A key with no windows."""

CLOSE_BATCH = 1000
"""At most this many keys have their windows closed per iteration; more wait for the next
(nothing changes in a window past its close, so waiting changes no result)."""


@dataclass(slots=True, unsafe_hash=True)
class Meta:
    """A partition's clock as committed: the latest event time seen and the late events.
    Never changed in place (not frozen only to be quicker to make: one per event)."""

    watermark: float = NEVER
    late: int = 0


def entry_time_of(event: Event) -> float:
    """An event's entry id's own timestamp (milliseconds before the ``-``), in seconds."""
    ms, _, _ = event.xid.partition(b"-")
    return int(ms) / 1000


def as_key(raw: Any) -> Any:
    """A decoded stored key as the processor's key (JSON arrays back to tuples)."""
    if isinstance(raw, list):
        return tuple(as_key(x) for x in raw)
    return raw


class Windowed(Protocol):
    """What a clock uses of its table (:class:`runnel.tables.WindowedTable`)."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> Kind: ...

    @property
    def grace(self) -> float: ...

    @property
    def expires(self) -> float: ...

    @property
    def default(self) -> Any: ...

    @property
    def late_stream(self) -> Sink | None: ...

    def time_of(self, event: Event) -> float: ...

    @property
    def event_time(self) -> Callable[[Event], float]: ...

    async def emit(
        self, state: PartitionState, closed: Sequence[tuple[Any, Window, Any]]
    ) -> None: ...


class Clock:
    """One windowed table's clock on one partition, for the processor writing it."""

    def __init__(self, table: Windowed, state: PartitionState, view: TableView) -> None:
        self.table = table
        self.state = state
        self.view = view
        self.late: set[bytes] = set()
        """The ids of this iteration's late events (their writes are dropped), and of those
        in :attr:`pending`."""
        self.pending: dict[bytes, Event] = {}
        """This iteration's events judged by the windows they change (a kind
        :attr:`~runnel.tables.windows.Kind.late_by_key`): late unless a change of theirs
        changes an open window (see :meth:`join`)."""
        self.next_due = -math.inf
        """No deadline is before this (-inf: unknown, ask the store)."""
        self.times: dict[bytes, float] = {}
        self.on_time = math.inf
        self.on_time_at = NEVER
        """An event time found on time at watermark :attr:`on_time_at` (later ones are too)."""
        kind = table.kind  # what each event uses, looked up once
        self._bump, self._latest_end = kind.bump, kind.latest_end
        self._grace, self._event_time = table.grace, table.event_time
        self._by_id = self._event_time is entry_time_of

    # What the processor sees.

    @property
    def meta(self) -> Meta:
        found = self.view.values.get(META)
        return found if isinstance(found, Meta) else Meta()

    @property
    def watermark(self) -> float:
        return self.meta.watermark

    def shut(self) -> float:
        """Windows ending at or before this are closed (or about to be)."""
        return self.meta.watermark - self.table.grace

    def is_late(self, t: float) -> bool:
        return self.table.kind.latest_end(t) + self.table.grace <= self.meta.watermark

    def lateness(self, xid: bytes) -> bool | bytes:
        """What a :class:`~runnel.tables.windowed.WindowedValue` of this event holds: False
        (on time), True (late: its changes are dropped) or its id (:meth:`join` decides)."""
        if xid not in self.late:
            return False
        return xid if xid in self.pending else True

    def time_late(self, t: float) -> bool:
        """Whether a change at time ``t`` (not an event's) is dropped: for a kind judged by
        the key, :meth:`~runnel.tables.windows.Kind.apply` decides (no window it changes)."""
        return not self.table.kind.late_by_key and self.is_late(t)

    def time_of(self, event: Event) -> float:
        found = self.times.get(event.xid)
        if found is None:
            found = self.times[event.xid] = self.table.time_of(event)
        return found

    def windows_of(self, key: Any) -> KeyWindows:
        value = self.view.values.get(key, ABSENT)
        return KeyWindows() if value is ABSENT else value

    def change(self, key: Any, t: float, op: Callable[[Any, Any], Any], arg: Any) -> None:
        """Make ``op(value, arg)`` the value of each open window of ``key`` that time ``t``
        is in."""
        view = self.view
        values = view.values
        kw = values.get(key, ABSENT)
        if kw is ABSENT:
            kw = EMPTY
        meta = values.get(META)
        shut = (meta.watermark if type(meta) is Meta else NEVER) - self._grace
        new = self._bump(kw, t, op, arg, shut)
        if new is not None:  # the usual case: a value changed, not the windows
            view.write(key, new)
            self.state.changed = True
            return
        table = self.table
        new = table.kind.apply(kw, t, lambda value: op(value, arg), table.default, shut)
        if new is not kw:
            self.store(key, new, kw)

    def join(self, xid: bytes, key: Any, t: float, op: Callable[[Any, Any], Any], arg: Any) -> None:
        """:meth:`change` for an event in :attr:`pending`: if it changes an open window of
        ``key`` (a session it joins), the event is on time."""
        kw = self.windows_of(key)
        table = self.table
        new = table.kind.apply(kw, t, lambda value: op(value, arg), table.default, self.shut())
        if new is not kw:
            self.store(key, new, kw)
            if self.pending.pop(xid, None) is not None:
                self.late.discard(xid)

    def store(self, key: Any, kw: KeyWindows | None, before: KeyWindows | None = None) -> None:
        """A key's windows changed (None: it has none left); ``before``, what they were,
        when known: the deadline stays if only values changed."""
        table = self.table
        if kw is None or not kw.items:
            self.view.write(key, ABSENT)
            self.set_deadline(key, None)
        else:
            self.view.write(key, kw)
            if before is None or not same_bounds(before, kw):
                self.set_deadline(key, deadline(table.kind, kw, table.grace, table.expires))
        self.state.changed = True

    def set_deadline(self, key: Any, when: float | None) -> None:
        self.view.set_deadline(key, when)
        if when is not None and when < self.next_due:
            self.next_due = when

    def _set_meta(self, meta: Meta) -> None:
        self.view.write(META, meta)
        self.state.changed = True

    # Each iteration.

    async def load(self) -> None:
        if not self.view.loaded(META):
            await self.state.load(self.view, [META])

    def before_now(self, events: Sequence[Event]) -> bool:
        """:meth:`before` without waiting, in the usual case (the clock loaded, no event
        late); False, having changed nothing, when :meth:`before` must run."""
        values = self.view.values
        meta = values.get(META, ABSENT)
        if meta is ABSENT and META not in values:
            return False
        if self.late:
            self.late.clear()
            self.pending.clear()
        times = self.times
        times.clear()
        latest_end, event_time, grace = self._latest_end, self._event_time, self._grace
        watermark = meta.watermark if type(meta) is Meta else NEVER
        on_time = self.on_time if self.on_time_at == watermark else math.inf
        by_id = self._by_id
        for event in events:
            xid = event.xid
            if by_id:  # entry_time_of(event), without a call
                ms, _, _ = xid.partition(b"-")
                t = times[xid] = int(ms) / 1000
            else:
                t = times[xid] = event_time(event)
            if t >= on_time:
                continue  # a window's latest end only grows with the time: on time too
            if latest_end(t) + grace <= watermark:
                return False  # late: before() counts it
            on_time = self.on_time = t
            self.on_time_at = watermark
        return True

    def after_now(self, events: Sequence[Event]) -> bool:
        """Move the watermark; False when windows are due and :meth:`after` must run."""
        meta = self.view.values.get(META)
        if type(meta) is not Meta:
            meta = Meta()
        if events:
            if len(events) == 1:
                latest = self.times.get(events[0].xid)
                if latest is None:
                    latest = self.time_of(events[0])
            else:
                latest = max(map(self.time_of, events))
            if latest > meta.watermark:
                meta = Meta(latest, meta.late)
                self._set_meta(meta)
        return meta.watermark < self.next_due

    async def before(self, events: Sequence[Event]) -> None:
        """Count (and send on) the events that are late."""
        await self.load()
        self.late.clear()
        self.pending.clear()
        self.times.clear()
        late = [e for e in events if self.is_late(self.time_of(e))]
        if not late:
            return
        self.late.update(e.xid for e in late)
        if self.table.kind.late_by_key:  # judged by what they change: after the iteration
            self.pending.update((e.xid, e) for e in late)
            return
        await self.count_late(late)

    async def count_late(self, late: Sequence[Event]) -> None:
        """Count late events, and send them to the late stream if there is one."""
        meta = self.meta
        self._set_meta(Meta(meta.watermark, meta.late + len(late)))
        self.view.late += len(late)  # in the metrics once committed
        target = self.table.late_stream
        if target is not None:
            await self.state.send_records(target, [e.record for e in late])

    async def after(self, events: Sequence[Event]) -> None:
        """Move the watermark; close and expire what it reached."""
        if not self.after_now(events):
            await self._close_due()

    def rolled_back(self) -> None:
        self.next_due = -math.inf  # what the failed iteration told us is gone: ask again
        self.late.clear()
        self.pending.clear()

    async def _close_due(self) -> None:
        watermark = self.meta.watermark
        view, store = self.view, self.state.store
        while True:
            epoch = view.epoch
            due: list[Any] = []
            later, offset, full = math.inf, 0, False
            pending = view.deadlines
            while not full:
                found = await store.due(self.table.name, self.state.partition.id, 500, offset)
                for raw, when in found:
                    if when > watermark:
                        later = min(later, when)
                        break
                    key = as_key(decode_key(raw))
                    if key not in pending:
                        due.append(key)
                        full = len(due) >= CLOSE_BATCH
                else:
                    if len(found) == 500:
                        offset += 500
                        continue
                break
            if view.epoch == epoch:
                break  # no commit completed meanwhile: the store's answer and ours agree
        for key, whence in pending.items():
            if whence is None:
                continue
            if whence <= watermark and not full:
                due.append(key)
                full = len(due) >= CLOSE_BATCH
            elif whence > watermark:
                later = min(later, whence)
        self.next_due = -math.inf if full else later
        if not due:
            return
        await self.state.load(view, [k for k in due if not view.loaded(k)])
        table = self.table
        closed: list[tuple[Any, Window, Any]] = []
        for key in due:
            kw = self.windows_of(key)
            kept, done = close(table.kind, kw, watermark, table.grace, table.expires)
            closed += [(key, window, value) for window, value in done]
            self.store(key, kept)
        if closed:
            self.view.closed += len(closed)  # in the metrics once committed
            await table.emit(self.state, closed)


class KeyedClock(Clock):
    """The clock of a kind whose events are judged late by the key they change (a
    session's): an event whose own windows closed is late only if none of its changes
    changed an open window (:meth:`Clock.join`), so it is counted after the iteration."""

    def after_now(self, events: Sequence[Event]) -> bool:
        if self.pending:
            return False  # after() counts them first
        return Clock.after_now(self, events)

    async def after(self, events: Sequence[Event]) -> None:
        if self.pending:
            late = list(self.pending.values())
            self.pending.clear()
            await self.count_late(late)
        await Clock.after(self, events)
