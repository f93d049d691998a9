"""The window functions against the plain reference model of tests/support/windows.py
(written from docs/state.md), on one key's events, driven as a partition's clock drives
them; and the keys a table view keeps encoded.

The model: events arrive in some order, each with an event time; the watermark is the
latest time seen so far. An event is late when every window it would be in was closed
already; otherwise it counts in its windows that are still open. After each event, the
windows whose end plus the grace period the watermark reached close, with the sum of what
counted in them, and those whose end plus ``expires`` it reached are deleted.
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

Events = list[tuple[float, int]]  # (event time, amount), in arrival order
Closed = list[tuple[Window, int]]

# Half seconds, so that times fall on window bounds and between them; spread wide, or
# close together (out of order by less than a window or a gap, the cases that decide).
events = st.one_of(
    st.lists(st.tuples(st.integers(0, 800).map(lambda x: x / 2), st.integers(1, 9)), max_size=60),
    st.lists(st.tuples(st.integers(0, 120).map(lambda x: x / 2), st.integers(1, 9)), max_size=30),
)
graces = st.sampled_from([0, 5, 30])
expiries = st.sampled_from([None, 40])


def run(kind: Kind, evs: Events, grace: float, expires: float | None = None) -> reference.Outcome:
    """Drive the window functions as a partition's clock does, for the key ``"k"``."""
    kw = KeyWindows()
    wm = -math.inf
    out = reference.Outcome()
    expires = grace if expires is None else expires
    for i, (t, amount) in enumerate(evs):
        shut = wm - grace
        if kind.latest_end(t) + grace > wm:  # on time
            kw = kind.bump(kw, t, operator.add, amount, shut) or kind.apply(
                kw, t, lambda v, a=amount: v + a, 0, shut
            )
        elif kind.late_by_key:  # late unless it changes an open window of its key
            new = kind.apply(kw, t, lambda v, a=amount: v + a, 0, shut)
            if new is kw:
                out.late.append(i)
            kw = new
        else:
            out.late.append(i)
        wm = max(wm, t)
        due = deadline(kind, kw, grace, expires)
        if due is not None and due <= wm:
            kept, closed = close(kind, kw, wm, grace, expires)
            out.closed += [("k", w.start, w.end, v) for w, v in closed]
            kw = kept or KeyWindows()
    if kind.windows(kw):
        out.windows = {"k": [(w.start, w.end, v) for w, v in kind.windows(kw)]}
    out.watermark = wm
    return out


def keyed(evs: Events) -> list[tuple[str, float, int]]:
    return [("k", t, a) for t, a in evs]


def same(found: reference.Outcome, want: reference.Outcome) -> None:
    assert sorted(found.closed, key=by_end) == sorted(want.closed, key=by_end)
    assert found.late == want.late
    assert found.windows == want.windows
    assert found.watermark == want.watermark


def by_end(c: reference.Closed) -> tuple[float, float]:
    return c[2], c[1]


def emitted(found: reference.Outcome) -> Closed:
    return [(Window(s, e), v) for _, s, e, v in found.closed]


@settings(max_examples=300, deadline=None)
@given(events, graces, expiries, st.sampled_from([10, 60]))
def test_tumbling(evs: Events, grace: int, expires: int | None, size: int) -> None:
    same(
        run(Tumbling(size), evs, grace, expires),
        reference.tumbling(size, keyed(evs), grace, expires),
    )


@settings(max_examples=300, deadline=None)
@given(events, graces, expiries, st.sampled_from([(60, 20), (30, 10), (20, 20), (50, 15)]))
def test_hopping(evs: Events, grace: int, expires: int | None, shape: tuple[int, int]) -> None:
    size, step = shape
    same(
        run(Hopping(size, step), evs, grace, expires),
        reference.hopping(size, step, keyed(evs), grace, expires),
    )


@settings(max_examples=300, deadline=None)
@given(events, graces, expiries, st.sampled_from([10, 45]))
def test_sliding(evs: Events, grace: int, expires: int | None, size: int) -> None:
    same(
        run(Sliding(size), evs, grace, expires), reference.sliding(size, keyed(evs), grace, expires)
    )


@settings(max_examples=300, deadline=None)
@given(events, graces, expiries, st.sampled_from([5, 20]))
def test_session(evs: Events, grace: int, expires: int | None, gap: int) -> None:
    same(run(Session(gap), evs, grace, expires), reference.session(gap, keyed(evs), grace, expires))


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
        if kind.latest_end(t) + grace > wm or kind.late_by_key:
            new = kind.apply(kw, t, lambda v, a=amount: v + a, 0, wm - grace)
            if kw.items and same_bounds(kw, new):
                assert deadline(kind, new, grace, 60) == deadline(kind, kw, grace, 60)
            kw = new
        wm = max(wm, t)
        due = deadline(kind, kw, grace, 60)
        if due is not None and due <= wm:
            kw = close(kind, kw, wm, grace, 60)[0] or KeyWindows()


def test_fixed_example_per_minute() -> None:
    evs: Events = [(0, 1), (30, 2), (59, 3), (60, 4), (10, 5), (125, 6), (61, 7)]
    # grace 0: the 10 arrives after the watermark reached 60, so window [0, 60) closed.
    found = run(Tumbling(60), evs, 0)
    assert emitted(found) == [(Window(0, 60), 6), (Window(60, 120), 4)]
    assert found.late == [4, 6]
    # grace 20: the 10 still counts; [60, 120) stays open until the watermark reaches 140.
    assert emitted(run(Tumbling(60), evs, 20)) == [(Window(0, 60), 11)]
    assert emitted(run(Tumbling(60), [*evs, (140, 1)], 20))[1] == (Window(60, 120), 11)


def test_a_late_event_between_sessions_merges_them_only_while_open() -> None:
    evs: Events = [(0, 1), (15, 1), (9, 1), (100, 1)]
    # gap 10: [0, 10) and [15, 25); the 9 arrives late but within the grace period: its
    # [9, 19) overlaps both, so they become one session [0, 25) of three events.
    assert emitted(run(Session(10), evs, 100)) == []
    assert emitted(run(Session(10), [*evs, (500, 1)], 100)) == [
        (Window(0, 25), 3),
        (Window(100, 110), 1),
    ]
    # Without grace, [0, 10) closed at 15: the 9 is less than the gap from its 0, but a
    # closed session is never extended: the 9 joins [15, 25) alone.
    assert emitted(run(Session(10), evs, 0)) == [(Window(0, 10), 1), (Window(9, 25), 2)]


def test_an_event_that_joins_an_open_session_is_not_late() -> None:
    # gap 5, grace 2: [10, 15) closes when the watermark reaches 17. At 16, the 6.5's own
    # session [6.5, 11.5) would have closed (at 13.5), but it joins [10, 15): 10 - 6.5 < 5.
    found = run(Session(5), [(10, 1), (16, 1), (6.5, 1)], 2)
    assert found.late == []
    assert found.windows == {"k": [(6.5, 15, 2), (16, 21, 1)]}
    # At 17 [10, 15) has closed: the 6.5 joins nothing open, and is late.
    found = run(Session(5), [(10, 1), (17, 1), (6.5, 1)], 2)
    assert found.late == [2]
    assert emitted(found) == [(Window(10, 15), 1)]


def test_an_event_near_a_closed_session_only_is_late_or_starts_its_own() -> None:
    # gap 5, grace 3, expires 100: [10, 15) closed when the watermark reached 19. The 13.5
    # is less than the gap from the 10, but a closed session (emitted already) changes no
    # more: the 13.5's own session [13.5, 18.5), open until 21.5, is a session of its own.
    found = run(Session(5), [(10, 1), (19, 1), (13.5, 1)], 3, 100)
    assert found.late == []
    assert found.windows == {"k": [(10, 15, 1), (13.5, 18.5, 1), (19, 24, 1)]}
    # At 22 its own session would be closed too: late.
    found = run(Session(5), [(10, 1), (22, 1), (13.5, 1)], 3, 100)
    assert found.late == [2]
    assert found.windows == {"k": [(10, 15, 1), (22, 27, 1)]}
    # An open session less than the gap away is joined as usual.
    found = run(Session(5), [(10, 1), (16, 1), (12, 1)], 0, 100)
    assert found.windows == {"k": [(10, 15, 1), (12, 21, 2)]}


def test_a_sliding_event_counts_in_the_open_windows_after_its_own_closed() -> None:
    # size 10, grace 3. At the 25, the watermark is 25: windows ending up to 22 are closed,
    # so the 20's window (10, 20] is; (15, 25] is open.
    evs: Events = [(20, 1), (25, 1), (21, 1), (12, 1), (19, 1), (30, 1), (40, 1)]
    found = run(Sliding(10), evs, 3, 100)
    # The 21: its own window (11, 21] closed, but (15, 25] holds it. The 12: every window
    # holding it ends before 22: late. The 19: (15, 25] holds it, and so would a window
    # ending before 29. Neither makes a window of its own; (10, 20] stays as it was.
    assert found.late == [3]
    assert emitted(found) == [
        (Window(10, 20), 1),
        (Window(15, 25), 4),
        (Window(20, 30), 3),
    ]
    assert found.windows == {"k": [(10, 20, 1), (15, 25, 4), (20, 30, 3), (30, 40, 1)]}


def test_a_closed_sliding_window_reads_as_emitted_until_it_expires() -> None:
    # size 10, grace 0, expires 3: the 0's window closes at 0 and is deleted at 3; its
    # event still counts in the later windows, and (-5, 5] reads as it was emitted until
    # it is deleted at 8.
    found = run(Sliding(10), [(0, 1), (5, 1), (4, 1)], 0, 3)
    assert emitted(found) == [(Window(-10, 0), 1), (Window(-5, 5), 2)]
    assert found.windows == {"k": [(-5, 5, 2)]}
    assert run(Sliding(10), [(0, 1), (5, 1), (8, 1)], 0, 3).windows == {"k": [(-2, 8, 3)]}


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


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.floats(-1e9, 1e9), st.sampled_from([-5e-324, -1e-320, 5e-324, -0.0, 0.3, 0.6])),
    st.sampled_from([Tumbling(10), Tumbling(0.1), Tumbling(3), Hopping(3, 3), Hopping(0.3, 0.1)]),
)
def test_every_time_is_in_the_windows_that_start_for_it(t: float, kind: Hopping) -> None:
    # A time a hair before zero divides to -0.0: its window is the one before zero. (A
    # time on a bound may round onto the end of the window before: 0.6 is past 5 * 0.1
    # and short of 6 * 0.1, which is 0.6000000000000001.)
    starts = kind.starts(t)
    assert starts
    assert all(s <= t <= s + kind.size for s in starts)
    assert kind.latest_end(t) == starts[-1] + kind.size
