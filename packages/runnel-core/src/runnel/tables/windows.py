"""Windows over a key's events, as pure functions of event times.

A windowed table keeps, per key, a :class:`KeyWindows`: the windows of that key that are
still open or not yet expired, each with its value, and up to where they are closed. How an
event time maps to windows is a :class:`Kind`:

- :class:`Tumbling` ``(size)``: back to back, ``[k*size, (k+1)*size)``; an event is in one.
- :class:`Hopping` ``(size, step)``: ``[k*step, k*step + size)``; an event is in
  ``size/step`` of them.
- :class:`Sliding` ``(size)``: one window per event time ``t`` of the key, the ``size``
  seconds up to and including it, ``(t - size, t]``. Kept as one partial value per event
  time (a *bucket*), merged when read.
- :class:`Session` ``(gap)``: a key's events less than ``gap`` apart form one session,
  ``[first, last + gap)``; an event between two sessions merges them. Which sessions an
  event joins depends on the key's others: a session event is judged late by the key it
  changes.

Sliding and session values are combined with a *merge* function (numbers add, lists
concatenate, sets unite unless told otherwise). A window **closes** when the partition's
watermark (the latest event time it has seen) reaches its end plus the grace period: it is
emitted then, and changes no more. It **expires** (is deleted) when the watermark reaches
its end plus ``expires``. An event is late when every window it would be in has closed
(docs/state.md says what that is per kind). Nothing here knows about stores or
processors: the functions are tested against a plain reference model written from the
docs (tests/support/windows.py, tests/state/test_window_kinds.py).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

NEVER = -math.inf
_floor = math.floor


def _slot(t: float, step: float) -> int:
    """The number of the last window start at or before ``t`` (``floor(t / step)`` where
    the division's rounding does not put ``t`` before its window: ``-5e-324 / 3`` is
    ``-0.0``, whose floor would give a window starting after ``t``)."""
    k = _floor(t / step)
    return k - 1 if k * step > t else k


Update = Callable[[Any], Any]
"""A change of one window's value: the old value (or the default) to the new one."""


class Window(NamedTuple):
    """A window's bounds, in seconds of event time: ``start <= t < end`` (for a sliding
    window ``start < t <= end``: the ``size`` seconds up to an event)."""

    start: float
    end: float


@dataclass(slots=True, unsafe_hash=True)
class KeyWindows:
    """A key's windows: ``(start, end, value)`` sorted by start (a sliding window's
    buckets: the event time, the first window end they count in, and their value; see
    :class:`Sliding`), and the end up to which its windows are closed. Never changed in
    place (but for :attr:`head`, a cache): a change makes a new one. (Not a frozen
    dataclass only because one of those takes almost three times as long to make, and one
    is made per event.)"""

    items: tuple[tuple[float, float, Any], ...] = ()
    closed_upto: float = NEVER
    head: tuple[int, bytes] | None = field(default=None, compare=False, repr=False)
    """``(n, data)``: the stored form of the first ``n`` items, once a codec made it (their
    values immutable). A change that keeps those items as they are keeps it (a change of
    the last window, a window added after the others, a close that drops none), so that a
    key holding many windows is not encoded whole at each commit. Opaque here."""


def merge_values(a: Any, b: Any) -> Any:
    """The default merge of two partial values (sessions, sliding buckets)."""
    if isinstance(a, bool) or isinstance(b, bool):
        raise TypeError("booleans have no default merge")
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a + b
    if isinstance(a, list) and isinstance(b, list):
        return a + b
    if isinstance(a, tuple) and isinstance(b, tuple):
        return a + b
    if isinstance(a, set | frozenset) and isinstance(b, set | frozenset):
        return a | b
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for key, value in b.items():
            out[key] = merge_values(out[key], value) if key in out else value
        return out
    raise TypeError(
        f"no default merge for {type(a).__name__} and {type(b).__name__}: pass merge=f "
        "where f(a, b) combines two partial values"
    )


def fresh(default: Any) -> Any:
    """A new window's value: the default, copied when it is mutable."""
    if isinstance(default, int | float | str | bytes | bool | tuple | frozenset | type(None)):
        return default
    return copy.deepcopy(default)


@dataclass(frozen=True)
class Kind:
    """How event times map to windows; the subclasses say."""

    size: float

    late_by_key: ClassVar[bool] = False
    """Whether an event whose :meth:`latest_end` has closed may still change an open window
    of the key it changes (a session it joins): then it is late only if none of its
    changes does, and :meth:`apply` decides (a clock judges it when it changes a key)."""

    @property
    def name(self) -> str:
        return type(self).__name__.lower()

    def describe(self) -> dict[str, float]:
        return {"size": self.size}

    # What an event changes.

    def latest_end(self, t: float) -> float:
        """No window an event at ``t`` would be in ends after this: once it is closed, the
        event is late (for :attr:`late_by_key` kinds, unless :meth:`apply` changes an
        open window). Never smaller for a later time (a clock relies on it)."""
        raise NotImplementedError

    def apply(
        self, kw: KeyWindows, t: float, update: Update, default: Any, shut: float = NEVER
    ) -> KeyWindows:
        """``kw`` after an event at ``t`` changed its open windows with ``update``: those
        ending after ``shut`` (the watermark less the grace period) and not closed; ``kw``
        itself when it changes none."""
        raise NotImplementedError

    def bump(
        self, kw: KeyWindows, t: float, op: Callable[[Any, Any], Any], arg: Any, shut: float
    ) -> KeyWindows | None:
        """:meth:`apply` of ``op(value, arg)`` in the usual case, where only a value
        changes (the same windows, so the same deadline); None when it is not that case
        (then call :meth:`apply`)."""
        return None

    # What a reader sees.

    def current(self, kw: KeyWindows, t: float, default: Any) -> Any:
        """The value of the window of an event at ``t`` (the latest, if several)."""
        raise NotImplementedError

    def windows(self, kw: KeyWindows) -> list[tuple[Window, Any]]:
        """Every window held, in order of start, with its value."""
        return [(Window(s, e), v) for s, e, v in kw.items]

    def holds(self, kw: KeyWindows) -> bool:
        """Whether :meth:`windows` has any."""
        return bool(kw.items)

    # Closing and expiring.

    def ends(self, kw: KeyWindows) -> list[float]:
        """The ends of the windows held, ascending (each window is closed when its end plus
        the grace period is reached)."""
        return sorted(e for _, e, _ in kw.items)

    def expiry(self, item: tuple[float, float, Any], expires: float) -> float:
        """When an item next needs attention as time passes (deleted, or changed)."""
        return item[1] + expires

    def alive(
        self, items: tuple[tuple[float, float, Any], ...], watermark: float, expires: float
    ) -> tuple[tuple[float, float, Any], ...]:
        """``items`` without those expired at ``watermark`` (``items`` itself if none)."""
        kept = tuple(item for item in items if item[1] + expires > watermark)
        return items if len(kept) == len(items) else kept

    def value_at_end(self, kw: KeyWindows, end: float) -> list[tuple[Window, Any]]:
        """The windows ending at ``end``, with their values (what closing emits)."""
        return [(Window(s, e), v) for s, e, v in kw.items if e == end]


def _open(kw: KeyWindows, end: float, shut: float) -> bool:
    return end > kw.closed_upto and end > shut


@dataclass(frozen=True)
class Hopping(Kind):
    """Windows of ``size`` seconds starting every ``step`` seconds (epoch-aligned)."""

    step: float = 0.0

    def __post_init__(self) -> None:
        if not self.size > 0 or not 0 < self.step <= self.size:
            raise ValueError("windows need size > 0 and 0 < step <= size")

    def describe(self) -> dict[str, float]:
        return {"size": self.size, "step": self.step}

    def starts(self, t: float) -> list[float]:
        """The starts of the windows holding ``t``, ascending."""
        last = _slot(t, self.step)
        out = []
        k = last
        while k * self.step + self.size > t and k * self.step <= t:
            out.append(k * self.step)
            k -= 1
        return out[::-1]

    def latest_end(self, t: float) -> float:
        return self.starts(t)[-1] + self.size

    def apply(
        self, kw: KeyWindows, t: float, update: Update, default: Any, shut: float = NEVER
    ) -> KeyWindows:
        held = {s: (s, e, v) for s, e, v in kw.items}
        for start in self.starts(t):
            end = start + self.size
            if not _open(kw, end, shut):
                continue
            old = held.get(start)
            held[start] = (start, end, update(fresh(default) if old is None else old[2]))
        return KeyWindows(tuple(held[s] for s in sorted(held)), kw.closed_upto)

    def current(self, kw: KeyWindows, t: float, default: Any) -> Any:
        start = self.starts(t)[-1]
        for s, _, v in kw.items:
            if s == start:
                return v
        return fresh(default)


@dataclass(frozen=True, init=False)
class Tumbling(Hopping):
    """Back-to-back windows of ``size`` seconds."""

    def __init__(self, size: float) -> None:
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "step", size)
        self.__post_init__()

    def describe(self) -> dict[str, float]:
        return {"size": self.size}

    # The same as a hopping window's with step == size, without the lists (the hot path).

    def starts(self, t: float) -> list[float]:
        return [_slot(t, self.step) * self.step]

    def latest_end(self, t: float) -> float:
        return _slot(t, self.step) * self.step + self.size

    def bump(
        self, kw: KeyWindows, t: float, op: Callable[[Any, Any], Any], arg: Any, shut: float
    ) -> KeyWindows | None:
        items = kw.items
        if not items:
            return None
        start, end, value = items[-1]
        step = self.step
        if start != _slot(t, step) * step or end <= kw.closed_upto or end <= shut:
            return None  # not the key's latest window, or it is closed: apply() says
        if len(items) == 1:
            return KeyWindows(((start, end, op(value, arg)),), kw.closed_upto)
        return KeyWindows((*items[:-1], (start, end, op(value, arg))), kw.closed_upto, kw.head)

    def apply(
        self, kw: KeyWindows, t: float, update: Update, default: Any, shut: float = NEVER
    ) -> KeyWindows:
        start = _slot(t, self.step) * self.step
        end = start + self.size
        if not _open(kw, end, shut):
            return kw
        items = kw.items
        if items and items[-1][0] == start:  # the usual case: the key's latest window
            last = (start, end, update(items[-1][2]))
            return KeyWindows((*items[:-1], last), kw.closed_upto, kw.head)
        for i, (s, _, v) in enumerate(items):
            if s == start:
                changed = (start, end, update(v))
                return KeyWindows((*items[:i], changed, *items[i + 1 :]), kw.closed_upto)
        added = (*items, (start, end, update(fresh(default))))
        if items and items[-1][0] > start:
            added = tuple(sorted(added, key=lambda item: item[0]))
            return KeyWindows(added, kw.closed_upto)
        return KeyWindows(added, kw.closed_upto, kw.head)  # the others kept, in order


@dataclass(frozen=True)
class Merging(Kind):
    """A kind whose partial values are combined (sliding buckets, merged sessions)."""

    merge: Callable[[Any, Any], Any] = field(default=merge_values, compare=False)

    def fold(self, values: Iterable[Any]) -> Any:
        it = iter(values)
        out = next(it)
        for value in it:
            out = self.merge(out, value)
        return out


def _bounds(item: tuple[float, float, Any]) -> tuple[float, float]:
    return item[0], item[1]


@dataclass(frozen=True)
class Sliding(Merging):
    """Per event time ``t`` of a key, the window ``(t - size, t]``.

    Kept as buckets ``(t, first, value)``: the value of the key's events at ``t``, counted
    in the windows ending at ``first`` or later (and before ``t + size``). An event whose
    own window is open makes (or adds to) the bucket ``(t, t, ...)``, which is its window
    too. One whose own window has closed is in the later windows ending before ``t +
    size``, those still to come included, so it is not late while one of them can be open;
    it adds to a bucket that counts only in windows ending after the closed ones (a closed
    window changes no more) and makes no window of its own. So does a bucket once its
    own window expired: it stays while later windows hold it."""

    def __post_init__(self) -> None:
        if not self.size > 0:
            raise ValueError("sliding windows need size > 0")

    def latest_end(self, t: float) -> float:
        return t + self.size

    def apply(
        self, kw: KeyWindows, t: float, update: Update, default: Any, shut: float = NEVER
    ) -> KeyWindows:
        floor = max(shut, kw.closed_upto)  # windows ending up to here are closed
        if t > floor:
            first = t  # its own window is open
        elif t + self.size > floor:
            first = math.nextafter(floor, math.inf)  # only in windows ending after floor
        else:
            return kw
        items = list(kw.items)
        for i, (s, e, v) in enumerate(items):
            if s == t and e == first:
                items[i] = (t, first, update(v))
                return KeyWindows(tuple(items), kw.closed_upto)
        items.append((t, first, update(fresh(default))))
        items.sort(key=_bounds)
        return KeyWindows(tuple(items), kw.closed_upto)

    def _merged(self, kw: KeyWindows, end: float) -> Any:
        low = end - self.size
        values = [v for s, e, v in kw.items if e <= end and s > low]
        return self.fold(copy.deepcopy(values)) if values else None

    def current(self, kw: KeyWindows, t: float, default: Any) -> Any:
        found = self._merged(kw, t)
        return fresh(default) if found is None else found

    def windows(self, kw: KeyWindows) -> list[tuple[Window, Any]]:
        return [(Window(s - self.size, s), self._merged(kw, s)) for s, e, _ in kw.items if s == e]

    def ends(self, kw: KeyWindows) -> list[float]:
        return [s for s, e, _ in kw.items if s == e]  # sorted by start already

    def holds(self, kw: KeyWindows) -> bool:
        return any(s == e for s, e, _ in kw.items)

    def expiry(self, item: tuple[float, float, Any], expires: float) -> float:
        # Its own window's expiry (then it stays, without it); at last, when no window
        # holding it is left: those end before ``size`` after it.
        if item[0] == item[1]:
            return item[0] + expires
        return item[0] + self.size + expires

    def alive(
        self, items: tuple[tuple[float, float, Any], ...], watermark: float, expires: float
    ) -> tuple[tuple[float, float, Any], ...]:
        out = []
        changed = False
        for item in items:
            s, e, v = item
            if s + self.size + expires <= watermark:
                changed = True  # every window holding it expired
            elif s == e and s + expires <= watermark:  # its own expired: in later ones only
                out.append((s, math.nextafter(s, math.inf), v))  # (sorts where it was)
                changed = True
            else:
                out.append(item)
        return tuple(out) if changed else items

    def value_at_end(self, kw: KeyWindows, end: float) -> list[tuple[Window, Any]]:
        if not any(s == end == e for s, e, _ in kw.items):
            return []
        return [(Window(end - self.size, end), self._merged(kw, end))]


@dataclass(frozen=True)
class Session(Merging):
    """A key's events less than ``size`` (the gap) apart, as one window.

    An event joins the open sessions of its key it is less than the gap from (``start -
    gap < t < end``), merging them; joining none, it starts ``[t, t + gap)``, unless that
    one would be closed already: then it changes nothing (late). A closed session is
    never joined: an event less than the gap from one and from no open session starts
    its own (or is late), beside it."""

    late_by_key: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not self.size > 0:
            raise ValueError("session windows need gap > 0")

    @property
    def gap(self) -> float:
        return self.size

    def describe(self) -> dict[str, float]:
        return {"gap": self.size}

    def latest_end(self, t: float) -> float:
        return t + self.size  # the end of its own session; it may join one ending later

    def apply(
        self, kw: KeyWindows, t: float, update: Update, default: Any, shut: float = NEVER
    ) -> KeyWindows:
        end = t + self.size
        floor = max(shut, kw.closed_upto)  # sessions ending up to here are closed
        items = kw.items
        # The open sessions this event's own [t, t + gap) overlaps merge with it.
        joined = [i for i, (s, e, _) in enumerate(items) if e > floor and s < end and t < e]
        if not joined:
            if end <= floor:
                return kw  # its own session would be closed already: late
            added = (t, end, update(fresh(default)))
            if not items or items[-1][0] <= t:  # the usual case: after the others
                return KeyWindows((*items, added), kw.closed_upto)
            return KeyWindows(tuple(sorted((*items, added), key=_bounds)), kw.closed_upto)
        if len(joined) == 1:
            i = joined[0]
            s, e, v = items[i]
            merged = (min(s, t), max(e, end), update(v))
            if i == len(items) - 1 and (i == 0 or items[i - 1][0] <= merged[0]):
                return KeyWindows((*items[:i], merged), kw.closed_upto)  # the usual case
        else:
            values = self.fold(items[i][2] for i in joined)
            start = min(t, items[joined[0]][0])
            merged = (start, max(end, max(items[i][1] for i in joined)), update(values))
        rest = [item for i, item in enumerate(items) if i not in joined]
        rest.append(merged)
        rest.sort(key=_bounds)
        return KeyWindows(tuple(rest), kw.closed_upto)

    def current(self, kw: KeyWindows, t: float, default: Any) -> Any:
        found = [v for s, e, v in kw.items if s <= t < e]
        return found[-1] if found else fresh(default)


# Closing and expiring, for every kind.


def deadline(kind: Kind, kw: KeyWindows, grace: float, expires: float) -> float | None:
    """When this key next needs attention: its first open window's close, or its first
    window's expiry (None: it holds nothing)."""
    if not kw.items:
        return None
    found = min(kind.expiry(item, expires) for item in kw.items)
    for end in kind.ends(kw):
        if end > kw.closed_upto:
            return min(found, end + grace)
    return found


def same_bounds(a: KeyWindows, b: KeyWindows) -> bool:
    """Whether two states of a key's windows hold the same windows, closed as far: then
    they have the same :func:`deadline` (only the values differ)."""
    if a.closed_upto != b.closed_upto or len(a.items) != len(b.items):
        return False
    for x, y in zip(a.items, b.items, strict=True):
        if x[0] != y[0] or x[1] != y[1]:
            return False
    return True


def close(
    kind: Kind, kw: KeyWindows, watermark: float, grace: float, expires: float
) -> tuple[KeyWindows | None, list[tuple[Window, Any]]]:
    """Close the windows whose end plus ``grace`` the watermark reached, in order of end,
    and drop those expired: the key's windows after that (None: none left) and what
    closed, with their final values."""
    closed: list[tuple[Window, Any]] = []
    upto = kw.closed_upto
    for end in dict.fromkeys(kind.ends(kw)):
        if upto < end <= watermark - grace:
            closed += kind.value_at_end(kw, end)
            upto = end
    items = kind.alive(kw.items, watermark, expires)
    if not items:
        return None, closed
    return KeyWindows(items, upto, kw.head if items is kw.items else None), closed
