"""The window functions against plain reference computations, on one key's events (and
the keys a table view keeps encoded).

The model both follow: events arrive in some order, each with an event time; the
watermark is the latest time seen so far. An event is late when every window it would
be in was closed already; otherwise it counts in its windows that are still open. After
each event, the windows whose end plus the grace period the watermark reached close,
with the sum of what counted in them. The references keep the events themselves, not
partial values.
"""

from __future__ import annotations

import math
import operator
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from runnel.tables.codec import encode_key, kept_key
from runnel.tables.windows import (
    Hopping,
    KeyWindows,
    Kind,
    Session,
    Sliding,
    Tumbling,
    Window,
    close,
    deadline,
    same_bounds,
)
from tests.support import windows as reference

Events = list[tuple[int, int]]  # (event time, amount), in arrival order
Closed = list[tuple[Window, int]]

events = st.lists(st.tuples(st.integers(0, 400), st.integers(1, 9)), max_size=60)
graces = st.sampled_from([0, 5, 30])


def run(kind: Kind, evs: Events, grace: float, expires: float | None = None) -> Closed:
    """Drive the window functions as a partition's clock does."""
    kw: KeyWindows | None = KeyWindows()
    wm = -math.inf
    out: Closed = []
    expires = grace if expires is None else expires
    for t, amount in evs:
        if kind.latest_end(t) + grace > wm:  # not late
            kw = kw or KeyWindows()
            kw = kind.bump(kw, t, operator.add, amount, wm - grace) or kind.apply(
                kw, t, lambda v, a=amount: v + a, 0, wm - grace
            )
        wm = max(wm, t)
        if kw is not None:
            due = deadline(kind, kw, grace, expires)
            if due is not None and due <= wm:
                kw, closed = close(kind, kw, wm, grace, expires)
                out += closed
    return out


def reference_hopping(size: int, step: int, evs: Events, grace: int) -> Closed:
    return [(Window(s, e), v) for _, s, e, v in reference.hopping(size, step, keyed(evs), grace)]


def reference_sliding(size: int, evs: Events, grace: int) -> Closed:
    return [(Window(s, e), v) for _, s, e, v in reference.sliding(size, keyed(evs), grace)]


def reference_session(gap: int, evs: Events, grace: int) -> Closed:
    return [(Window(s, e), v) for _, s, e, v in reference.session(gap, keyed(evs), grace)]


def keyed(evs: Events) -> list[tuple[str, float, int]]:
    return [("k", t, a) for t, a in evs]


def ordered(closed: Closed) -> Closed:
    return sorted(closed, key=lambda c: (c[0].end, c[0].start))


@settings(max_examples=300, deadline=None)
@given(events, graces, st.sampled_from([10, 60]))
def test_tumbling(evs: Events, grace: int, size: int) -> None:
    assert ordered(run(Tumbling(size), evs, grace)) == ordered(
        reference_hopping(size, size, evs, grace)
    )


@settings(max_examples=300, deadline=None)
@given(events, graces, st.sampled_from([(60, 20), (30, 10), (20, 20), (50, 15)]))
def test_hopping(evs: Events, grace: int, shape: tuple[int, int]) -> None:
    size, step = shape
    assert ordered(run(Hopping(size, step), evs, grace)) == ordered(
        reference_hopping(size, step, evs, grace)
    )


@settings(max_examples=300, deadline=None)
@given(events, graces, st.sampled_from([10, 45]))
def test_sliding(evs: Events, grace: int, size: int) -> None:
    assert ordered(run(Sliding(size), evs, grace)) == ordered(reference_sliding(size, evs, grace))


@settings(max_examples=300, deadline=None)
@given(events, graces, st.sampled_from([5, 20]))
def test_session(evs: Events, grace: int, gap: int) -> None:
    assert ordered(run(Session(gap), evs, grace)) == ordered(reference_session(gap, evs, grace))


kinds = st.sampled_from([Tumbling(10), Hopping(60, 20), Sliding(10), Session(5)])
ALL_KINDS = [
    Tumbling(10),
    Tumbling(0.1),
    Hopping(60, 20),
    Hopping(0.3, 0.1),
    Sliding(10),
    Session(5),
]


@settings(max_examples=300, deadline=None)
@given(events, graces, st.sampled_from([Tumbling(10), Tumbling(0.1), Tumbling(60)]))
def test_the_quick_change_of_a_tumbling_window_is_what_apply_makes(
    evs: Events, grace: int, kind: Kind
) -> None:
    # A clock tries bump() first (the key's latest window, only its value changing).
    kw, wm = KeyWindows(), -math.inf
    for t, amount in evs:
        t = t / 7  # times that are not multiples of the size
        if kind.latest_end(t) + grace > wm:
            new = kind.apply(kw, t, lambda v, a=amount: v + a, 0, wm - grace)
            quick = kind.bump(kw, t, operator.add, amount, wm - grace)
            if quick is not None:
                assert quick == new and same_bounds(kw, quick)
            kw = new
        wm = max(wm, t)
        due = deadline(kind, kw, grace, 60)
        if due is not None and due <= wm:
            kw = close(kind, kw, wm, grace, 60)[0] or KeyWindows()


@settings(max_examples=300, deadline=None)
@given(st.floats(-1e9, 1e9), st.floats(0, 1e6), st.sampled_from(ALL_KINDS))
def test_a_later_time_is_in_a_window_ending_no_sooner(t: float, later: float, kind: Kind) -> None:
    # A clock skips the lateness check of a time at or after one found on time.
    assert kind.latest_end(t + later) >= kind.latest_end(t)


@settings(max_examples=300, deadline=None)
@given(events, graces, kinds)
def test_a_change_that_keeps_the_bounds_keeps_the_deadline(
    evs: Events, grace: int, kind: Kind
) -> None:
    # A clock skips computing the deadline when only values changed: it must be the same.
    kw, wm = KeyWindows(), -math.inf
    for t, amount in evs:
        if kind.latest_end(t) + grace > wm:
            new = kind.apply(kw, t, lambda v, a=amount: v + a, 0, wm - grace)
            if kw.items and same_bounds(kw, new):
                assert deadline(kind, new, grace, 60) == deadline(kind, kw, grace, 60)
            kw = new
        wm = max(wm, t)
        due = deadline(kind, kw, grace, 60)
        if due is not None and due <= wm:
            kw = close(kind, kw, wm, grace, 60)[0] or KeyWindows()


def test_fixed_example_per_minute() -> None:
    evs = [(0, 1), (30, 2), (59, 3), (60, 4), (10, 5), (125, 6), (61, 7)]
    # grace 0: the 10 arrives after the watermark reached 60, so window [0, 60) closed.
    assert run(Tumbling(60), evs, 0) == [(Window(0, 60), 6), (Window(60, 120), 4)]
    # grace 20: the 10 still counts; [60, 120) stays open until the watermark reaches 140.
    assert run(Tumbling(60), evs, 20) == [(Window(0, 60), 11)]
    assert run(Tumbling(60), [*evs, (140, 1)], 20)[1] == (Window(60, 120), 11)


def test_a_late_event_between_sessions_merges_them_only_while_open() -> None:
    evs = [(0, 1), (15, 1), (9, 1), (100, 1)]
    # gap 10: [0, 10) and [15, 25); the 9 arrives late but within the grace period: its
    # [9, 19) overlaps both, so they become one session [0, 25) of three events.
    assert run(Session(10), evs, 100) == []
    assert run(Session(10), [*evs, (500, 1)], 100) == [
        (Window(0, 25), 3),
        (Window(100, 110), 1),
    ]
    # Without grace, [0, 10) closed at 15: the 9 is late for it, and [9, 19) overlaps
    # it, but a closed session is never extended: the 9 joins [15, 25) alone.
    assert run(Session(10), evs, 0) == [(Window(0, 10), 1), (Window(9, 25), 2)]


def test_expired_windows_are_dropped_and_closed_ones_stay_until_then() -> None:
    kind = Tumbling(10)
    kw = kind.apply(KeyWindows(), 5, lambda v: v + 1, 0)
    kw = kind.apply(kw, 15, lambda v: v + 1, 0)
    kept, closed = close(kind, kw, 25, grace=0, expires=20)
    assert closed == [(Window(0, 10), 1), (Window(10, 20), 1)]
    assert kept is not None and [w for w, _ in kind.windows(kept)] == [
        Window(0, 10),
        Window(10, 20),
    ]
    assert deadline(kind, kept, 0, 20) == 30
    gone, closed = close(kind, kept, 40, grace=0, expires=20)
    assert gone is None and closed == []


def test_hopping_starts() -> None:
    assert Hopping(60, 20).starts(65) == [20, 40, 60]
    assert Hopping(60, 20).starts(60) == [20, 40, 60]
    assert Tumbling(60).starts(59.9) == [0]


def test_default_merge() -> None:
    kind = Session(10)
    assert kind.fold([1, 2.5]) == 3.5
    assert kind.fold([[1], [2]]) == [1, 2]
    assert kind.fold([{1}, {2}]) == {1, 2}
    assert kind.fold([{"a": 1}, {"a": 2, "b": 1}]) == {"a": 3, "b": 1}
    custom = Session(10, merge=operator.mul)
    assert custom.fold([2, 3]) == 6


def test_keys_kept_encoded_cost_their_size_not_a_buffer_each() -> None:
    # A table view keeps thousands of encoded keys; orjson's own bytes hold 4 KiB each.
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [kept_key(f"k{i}") for i in range(2000)]
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept[5] == encode_key("k5") == b'"k5"'
    assert used < 2000 * 200
