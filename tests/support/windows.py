"""Windows computed the plain way, from the events themselves, for tests to compare with.

The model: events arrive in order, each ``(key, time, amount)``; the watermark is the
latest time seen on the partition. An event is late when every window it would be in is
closed already (its end plus ``grace`` reached by the watermark); otherwise it counts in
each of its windows still open. After each event, windows whose end plus ``grace`` the
watermark reached close, with the sum of what counted in them.
"""

from __future__ import annotations

import math
from typing import Any

Event = tuple[Any, float, int]  # key, event time, amount
Closed = tuple[Any, float, float, int]  # key, start, end, total


def hopping(size: float, step: float, events: list[Event], grace: float) -> list[Closed]:
    def starts(t: float) -> list[float]:
        top = math.floor(t / step)
        return [
            k * step
            for k in range(top - math.ceil(size / step) - 1, top + 1)
            if k * step <= t < k * step + size
        ]

    sums: dict[tuple[Any, float], int] = {}
    emitted: set[tuple[Any, float]] = set()
    wm = -math.inf
    out: list[Closed] = []
    for key, t, amount in events:
        for start in starts(t):
            if start + size + grace > wm:
                sums[(key, start)] = sums.get((key, start), 0) + amount
        wm = max(wm, t)
        for (k, start), total in sorted(sums.items(), key=lambda kv: kv[0][1]):
            if (k, start) not in emitted and start + size + grace <= wm:
                emitted.add((k, start))
                out.append((k, start, start + size, total))
    return out


def tumbling(size: float, events: list[Event], grace: float) -> list[Closed]:
    return hopping(size, size, events, grace)


def sliding(size: float, events: list[Event], grace: float) -> list[Closed]:
    accepted: list[Event] = []
    emitted: set[tuple[Any, float]] = set()
    wm = -math.inf
    out: list[Closed] = []
    for key, t, amount in events:
        if t + grace > wm:
            accepted.append((key, t, amount))
        wm = max(wm, t)
        for k, end in sorted({(k, u) for k, u, _ in accepted}, key=lambda x: x[1]):
            if (k, end) not in emitted and end + grace <= wm:
                emitted.add((k, end))
                total = sum(a for j, u, a in accepted if j == k and end - size < u <= end)
                out.append((k, end - size, end, total))
    return out


def session(gap: float, events: list[Event], grace: float) -> list[Closed]:
    sessions: list[tuple[Any, list[tuple[float, int]]]] = []  # open ones: key, events
    wm = -math.inf
    out: list[Closed] = []

    def bounds(s: list[tuple[float, int]]) -> tuple[float, float]:
        return min(t for t, _ in s), max(t for t, _ in s) + gap

    for key, t, amount in events:
        if t + gap + grace > wm:
            joined = [
                s
                for s in sessions
                if s[0] == key and bounds(s[1])[0] < t + gap and t < bounds(s[1])[1]
            ]
            merged = [(t, amount)] + [e for _, s in joined for e in s]
            sessions = [s for s in sessions if s not in joined] + [(key, merged)]
        wm = max(wm, t)
        for s in sorted(sessions, key=lambda s: bounds(s[1])[1]):
            if bounds(s[1])[1] + grace <= wm:
                sessions.remove(s)
                out.append((s[0], *bounds(s[1]), sum(a for _, a in s[1])))
    return out


def late(kind_end: Any, events: list[Event], grace: float) -> int:
    """How many events are late, given the end of the last window of a time."""
    wm, count = -math.inf, 0
    for _, t, _ in events:
        if kind_end(t) + grace <= wm:
            count += 1
        wm = max(wm, t)
    return count
