"""Windows computed the plain way, from the events themselves, for tests to compare with.

Written from docs/state.md ("Windows"), not from the code: events arrive one iteration
each, as ``(key, time, amount)``; after each, the partition's watermark is the latest time
seen. A window closes once the watermark reaches its end plus ``grace``: it is emitted
then with the sum of what counted in it, and changes no more; it is deleted once the
watermark reaches its end plus ``expires``. An event is late when every window it would
be in has closed; otherwise it counts in each of those still open. Per kind:

- tumbling and hopping: the windows ``[k*step, k*step + size)`` holding ``t``;
- sliding: one window ``(u - size, u]`` per event time ``u`` of the key, made by an event
  that arrives while it is open; an event at ``t`` would be in those of the times ``u``
  in ``[t, t + size)``, those still to come included;
- session: an event joins every open session of its key holding an event less than
  ``gap`` from it (merging them); joining none, it makes a session of its own, unless that
  one would be closed already (then it is late). A closed session is never joined.

The models keep the events themselves, not partial values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

Event = tuple[Any, float, int]  # key, event time, amount
Closed = tuple[Any, float, float, int]  # key, start, end, total


@dataclass
class Outcome:
    """What a partition's events did to a windowed table."""

    closed: list[Closed] = field(default_factory=list)
    """The windows emitted on close, in the order they closed."""
    late: list[int] = field(default_factory=list)
    """The late events, by their place in the input."""
    windows: dict[Any, list[tuple[float, float, int]]] = field(default_factory=dict)
    """Per key, its windows not deleted at the end, ``(start, end, total)`` by start."""
    watermark: float = -math.inf


@dataclass
class Held:
    """A window of one key: its bounds, its total, whether it has closed."""

    key: Any
    start: float
    end: float
    total: int = 0
    closed: bool = False


H = TypeVar("H", bound=Held)


def _settle(held: list[H], out: Outcome, wm: float, grace: float, expires: float) -> list[H]:
    """The watermark moved to ``wm``: close (emit) what it reached; what is not deleted."""
    for h in sorted(held, key=lambda h: (h.end, h.start)):
        if not h.closed and h.end + grace <= wm:
            h.closed = True
            out.closed.append((h.key, h.start, h.end, h.total))
    return [h for h in held if h.end + expires > wm]


def _finish(held: Sequence[Held], out: Outcome, wm: float) -> Outcome:
    out.watermark = wm
    for h in sorted(held, key=lambda h: (h.start, h.end)):
        out.windows.setdefault(h.key, []).append((h.start, h.end, h.total))
    return out


def hopping(
    size: float, step: float, events: list[Event], grace: float, expires: float | None = None
) -> Outcome:
    expires = grace if expires is None else expires
    held: list[Held] = []
    out, wm = Outcome(), -math.inf
    for i, (key, t, amount) in enumerate(events):
        top = math.floor(t / step)
        starts = [
            k * step
            for k in range(top - math.ceil(size / step) - 1, top + 1)
            if k * step <= t < k * step + size
        ]
        still = [s for s in starts if s + size + grace > wm]
        if not still:
            out.late.append(i)
        for start in still:
            found = [h for h in held if h.key == key and h.start == start]
            if not found:
                found = [Held(key, start, start + size)]
                held += found
            found[0].total += amount
        wm = max(wm, t)
        held = _settle(held, out, wm, grace, expires)
    return _finish(held, out, wm)


def tumbling(
    size: float, events: list[Event], grace: float, expires: float | None = None
) -> Outcome:
    return hopping(size, size, events, grace, expires)


def sliding(
    size: float, events: list[Event], grace: float, expires: float | None = None
) -> Outcome:
    expires = grace if expires is None else expires
    held: list[Held] = []
    counted: list[tuple[Any, float, int]] = []
    out, wm = Outcome(), -math.inf
    for i, (key, t, amount) in enumerate(events):
        if t + size + grace <= wm:  # every window holding t ends before t + size: closed
            out.late.append(i)
        else:
            counted.append((key, t, amount))
            if t + grace > wm and not any(h.key == key and h.end == t for h in held):
                held.append(Held(key, t - size, t))  # its own window, open
        for h in held:
            if not h.closed:  # a closed window changes no more
                h.total = sum(a for k, u, a in counted if k == h.key and h.start < u <= h.end)
        wm = max(wm, t)
        held = _settle(held, out, wm, grace, expires)
    return _finish(held, out, wm)


@dataclass
class _Session(Held):
    events: list[tuple[float, int]] = field(default_factory=list)


def _session_of(key: Any, events: list[tuple[float, int]], gap: float) -> _Session:
    times = [t for t, _ in events]
    return _Session(key, min(times), max(times) + gap, sum(a for _, a in events), events=events)


def session(gap: float, events: list[Event], grace: float, expires: float | None = None) -> Outcome:
    expires = grace if expires is None else expires
    sessions: list[_Session] = []
    out, wm = Outcome(), -math.inf
    for i, (key, t, amount) in enumerate(events):
        joined = [
            s
            for s in sessions
            if s.key == key and not s.closed and any(abs(t - u) < gap for u, _ in s.events)
        ]
        if joined:
            merged = [e for s in joined for e in s.events] + [(t, amount)]
            sessions = [s for s in sessions if all(s is not j for j in joined)]
            sessions.append(_session_of(key, merged, gap))
        elif t + gap + grace > wm:  # a session of its own, still open
            sessions.append(_session_of(key, [(t, amount)], gap))
        else:
            out.late.append(i)
        wm = max(wm, t)
        sessions = _settle(sessions, out, wm, grace, expires)
    return _finish(sessions, out, wm)
