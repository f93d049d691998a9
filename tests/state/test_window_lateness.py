"""What is late, for every window kind, end to end on every store: random event times over
two keys, out of order, with grace and expiry, against the reference model of
tests/support/windows.py (written from docs/state.md, "Windows"). The windows emitted on
close, the late events (the count, and the records sent to the ``late=`` stream) and the
windows read back after must all be the model's. Then the cases docs/state.md spells out,
on fixed times: a session event joining an open session, one near a closed session only,
a sliding event whose own window has closed while a later one holds it, and a session
event whose iteration failed and was tried again."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runnel import App, ExceptionPolicy, WindowClosed
from runnel.tables.clock import Meta
from runnel.testing import run
from tests.state.test_windows import Sale, arrived
from tests.support import windows as reference

SHAPES = {
    "tumbling": lambda table, **o: table.tumbling(10, **o),
    "hopping": lambda table, **o: table.hopping(12, 4, **o),
    "sliding": lambda table, **o: table.sliding(8, **o),
    "session": lambda table, **o: table.session(5, **o),
}


def model(
    shape: str, events: list[reference.Event], grace: float, expires: float | None
) -> reference.Outcome:
    if shape == "tumbling":
        return reference.tumbling(10, events, grace, expires)
    if shape == "hopping":
        return reference.hopping(12, 4, events, grace, expires)
    if shape == "sliding":
        return reference.sliding(8, events, grace, expires)
    return reference.session(5, events, grace, expires)


@dataclass
class Seen:
    """What a table made of the events, as anyone reads it back."""

    closed: list[reference.Closed]
    late: list[Sale]
    clock: Meta
    windows: dict[str, list[tuple[float, float, int]]]
    listed: list[str]


async def play(
    store_url: str,
    shape: str,
    sales: list[Sale],
    grace: float,
    expires: float | None,
    *,
    batches: bool = False,
    want: reference.Outcome,
) -> Seen:
    """Run ``sales`` through a windowed table of ``shape`` in a fresh app, one event per
    iteration (or ``take(1)`` batches), and read back what it made."""
    app = App(name=f"t{uuid.uuid4().hex[:10]}", redis_url=store_url)
    stream = app.stream("sales", record=Sale, partition_by="shop", partition_count=1)
    closed = app.stream("closed", record=WindowClosed, partition_by="key", partition_count=1)
    too_late = app.stream("too_late", record=Sale, partition_by="shop", partition_count=1)
    table = SHAPES[shape](
        app.table("totals", source=stream, default=0),
        grace=grace,
        expires=expires,
        time="at",
        on_close=closed,
        late=too_late,
    )

    if batches:

        @app.processor(stream)
        async def total_batches(events: Any) -> None:
            async for batch in events.take(1, within=0):
                for event in batch:
                    table.at(event)[event.record.shop] += event.record.amount

    else:

        @app.processor(stream)
        async def total(events: Any) -> None:
            async for sale in events.records():
                table[sale.shop] += sale.amount

    async with run(app, store=store_url) as t:
        await stream.send(*sales)
        await t.processed()
        emitted = await arrived(t, closed, len(want.closed))
        late = await arrived(t, too_late, len(want.late))
    try:
        windows = {}
        for key in ("a", "b"):
            found = [(w.start, w.end, v) for w, v in await table.windows(key)]
            if found:
                windows[key] = found
        return Seen(
            sorted((r.key, r.start, r.end, r.value) for r in emitted),
            list(late),
            (await table.clocks())[0],
            windows,
            sorted([key async for key, _ in table.items()]),
        )
    finally:
        await app.aclose()


def check(seen: Seen, want: reference.Outcome, sales: list[Sale]) -> None:
    assert seen.closed == sorted(want.closed)
    assert seen.late == [sales[i] for i in want.late]
    assert seen.clock == Meta(watermark=want.watermark, late=len(want.late))
    assert seen.windows == want.windows
    assert seen.listed == sorted(want.windows)  # the keys holding windows


def as_sales(events: list[reference.Event]) -> list[Sale]:
    return [Sale(shop=k, at=t, amount=a) for k, t, a in events]


# Half seconds over a span of a few windows (sizes 8 to 12, a gap of 5), so that events
# fall on bounds, within a gap of each other and out of order by less and more than grace.
EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.integers(0, 120).map(lambda x: x / 2),
        st.integers(1, 9),
    ),
    min_size=1,
    max_size=16,
)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    shape=st.sampled_from(sorted(SHAPES)),
    events=EVENTS,
    grace=st.sampled_from([0, 3, 7]),
    expires=st.sampled_from([None, 15]),
    batches=st.booleans(),
)
async def test_every_kind_is_late_as_the_docs_say(
    store_url: str,
    shape: str,
    events: list[reference.Event],
    grace: float,
    expires: float | None,
    batches: bool,
) -> None:
    want = model(shape, events, grace, expires)
    sales = as_sales(events)
    seen = await play(store_url, shape, sales, grace, expires, batches=batches, want=want)
    check(seen, want, sales)


async def test_a_session_event_that_joins_an_open_session_is_not_late(store_url: str) -> None:
    # gap 5, grace 2: ada's [10, 15) closes when the watermark reaches 17. At 16 (bob), the
    # 6.5's own session [6.5, 11.5) would have closed at 13.5, but it joins [10, 15).
    sales = as_sales([("a", 10, 1), ("b", 16, 1), ("a", 6.5, 1), ("b", 100, 1)])
    want = model("session", [(s.shop, s.at, s.amount) for s in sales], 2, 100)
    assert want.late == [] and ("a", 6.5, 15, 2) in want.closed
    for batches in (False, True):
        seen = await play(store_url, "session", sales, 2, 100, batches=batches, want=want)
        check(seen, want, sales)


async def test_a_session_event_near_a_closed_session_only_starts_its_own_or_is_late(
    store_url: str,
) -> None:
    # gap 5, grace 3: a's [10, 15) closed (and was emitted) when the watermark reached 19.
    # The 13.5 is less than the gap from the 10, but a closed session changes no more: its
    # own [13.5, 18.5), open until 21.5, is a session beside it. At 22 it would be late.
    events: list[reference.Event] = [("a", 10, 1), ("b", 19, 1), ("a", 13.5, 2)]
    want = model("session", events, 3, 100)
    assert want.late == [] and want.windows["a"] == [(10, 15, 1), (13.5, 18.5, 2)]
    sales = as_sales(events)
    check(await play(store_url, "session", sales, 3, 100, want=want), want, sales)
    events = [("a", 10, 1), ("b", 22, 1), ("a", 13.5, 2)]
    want = model("session", events, 3, 100)
    assert want.late == [2] and want.windows["a"] == [(10, 15, 1)]
    sales = as_sales(events)
    check(await play(store_url, "session", sales, 3, 100, want=want), want, sales)


async def test_a_sliding_event_counts_in_a_later_open_window_after_its_own_closed(
    store_url: str,
) -> None:
    # size 8, grace 3: at 25, windows ending up to 22 are closed: a's (12, 20] is, and
    # (17, 25] is open. The 21's own window (13, 21] has closed, but (17, 25] holds it,
    # and so would any window ending before 29: not late, and (12, 20] stays as emitted.
    # The 14: every window holding it ends before 22: late. At 60, b's 55 has no window
    # of its own, and no later one yet: b holds none.
    events: list[reference.Event] = [
        ("a", 20, 1),
        ("a", 25, 1),
        ("a", 21, 5),
        ("a", 14, 7),
        ("a", 27, 1),
        ("a", 60, 1),
        ("b", 55, 1),
    ]
    want = model("sliding", events, 3, 100)
    assert want.late == [3] and "b" not in want.windows
    assert sorted(want.closed) == [
        ("a", 12, 20, 1),
        ("a", 17, 25, 7),
        ("a", 19, 27, 8),
    ]
    sales = as_sales(events)
    check(await play(store_url, "sliding", sales, 3, 100, want=want), want, sales)


async def test_a_failed_iteration_of_a_session_event_is_judged_again(
    app_name: str, store_url: str
) -> None:
    # The 6.5 joins a's open [10, 15); the 1 joins nothing (6.5 - 1 >= 5) and is late.
    # Each fails once after its change, which is rolled back: each is judged once more,
    # the 6.5 counted once in its session, the 1 counted late once.
    events: list[reference.Event] = [
        ("a", 10, 1),
        ("b", 16, 1),
        ("a", 6.5, 2),
        ("a", 1, 4),
        ("b", 100, 1),
    ]
    want = model("session", events, 2, None)
    assert want.late == [3] and ("a", 6.5, 15, 3) in want.closed
    app = App(name=app_name, redis_url=store_url)
    stream = app.stream("sales", record=Sale, partition_by="shop", partition_count=1)
    closed = app.stream("closed", record=WindowClosed, partition_by="key", partition_count=1)
    too_late = app.stream("too_late", record=Sale, partition_by="shop", partition_count=1)
    table = app.table("totals", source=stream, default=0).session(
        5, grace=2, time="at", on_close=closed, late=too_late
    )
    failed: set[float] = set()

    @app.processor(stream, exception_policy=ExceptionPolicy.RETRY, retries=3, retry_backoff=0.01)
    async def total(events: Any) -> None:
        async for sale in events.records():
            table[sale.shop] += sale.amount
            if sale.at in (6.5, 1) and sale.at not in failed:
                failed.add(sale.at)
                raise RuntimeError("once")

    sales = as_sales(events)
    async with run(app, store=store_url) as t:
        await stream.send(*sales)
        await t.processed()
        emitted = await arrived(t, closed, len(want.closed))
        late = await arrived(t, too_late, len(want.late))
    assert failed == {6.5, 1}
    assert sorted((r.key, r.start, r.end, r.value) for r in emitted) == sorted(want.closed)
    assert late == [sales[3]]
    assert (await table.clocks())[0] == Meta(watermark=100, late=1)
    await app.aclose()
