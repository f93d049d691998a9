"""Windowed tables end to end, on every store, against the plain references of
tests/support/windows.py on fixed event times: what closes is emitted once with the
reference's value, late events are dropped and counted (or sent on), and windows are read
back as the processor and anyone else see them."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
from typing import Any

import pytest

from runnel import App, ExceptionPolicy, Record, Window, WindowClosed
from runnel.exceptions import Misconfigured, TableError
from runnel.testing import run
from tests.support import windows as reference


class Sale(Record):
    shop: str
    at: float
    amount: int


# Out of order within and past the grace period, over several keys, then a far event that
# closes everything still open.
TIMES = [0, 10, 59, 61, 30, 5, 119, 62, 180, 50, 181, 240, 200, 301, 299, 420, 100, 1000]
SALES = [Sale(shop=f"s{i % 3}", at=t, amount=i + 1) for i, t in enumerate(TIMES)] + [
    Sale(shop=f"s{k}", at=5000, amount=0) for k in range(3)
]


def as_events(sales: list[Sale]) -> list[reference.Event]:
    return [(s.shop, s.at, s.amount) for s in sales]


async def arrived(t: Any, stream: Any, count: int) -> list[Any]:
    """The records of ``stream`` once ``count`` are there (on a Redis Cluster, outputs are
    relayed from an outbox just after their commit), or what is there after a while."""
    for _ in range(200):
        found = await t.events(stream)
        if len(found) >= count:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.05)  # and nothing more comes
    return list(await t.events(stream))


def closed_of(records: list[Any]) -> list[reference.Closed]:
    return sorted((r.key, r.start, r.end, r.value) for r in records)


def shop_app(app_name: str, store_url: str = "memory://") -> tuple[App, Any]:
    app = App(name=app_name, redis_url=store_url)
    sales = app.stream("sales", record=Sale, partition_by="shop", partition_count=1)
    return app, sales


def build(app: App, sales: Any, shape: str, grace: float, **more: Any) -> tuple[Any, Any]:
    out = app.stream("closed", record=WindowClosed, partition_by="key", partition_count=2)
    table = app.table("totals", source=sales, default=0)
    options: dict[str, Any] = {"grace": grace, "time": "at", "on_close": out, **more}
    if shape == "tumbling":
        windowed = table.tumbling(60, **options)
    elif shape == "hopping":
        windowed = table.hopping(60, 20, **options)
    elif shape == "sliding":
        windowed = table.sliding(45, **options)
    else:
        windowed = table.session(25, **options)
    return windowed, out


def expected(shape: str, events: list[reference.Event], grace: float) -> list[reference.Closed]:
    found: reference.Outcome
    if shape == "tumbling":
        found = reference.tumbling(60, events, grace)
    elif shape == "hopping":
        found = reference.hopping(60, 20, events, grace)
    elif shape == "sliding":
        found = reference.sliding(45, events, grace)
    else:
        found = reference.session(25, events, grace)
    return sorted(found.closed)


@pytest.mark.parametrize("shape", ["tumbling", "hopping", "sliding", "session"])
@pytest.mark.parametrize("grace", [0, 30])
async def test_closed_windows_are_emitted_once_as_the_reference_computes(
    app_name: str, store_url: str, shape: str, grace: float
) -> None:
    app, sales = shop_app(app_name, store_url)
    windowed, out = build(app, sales, shape, grace)

    @app.processor(sales)
    async def total(events: Any) -> None:
        async for sale in events.records():
            windowed[sale.shop] += sale.amount

    async with run(app, store=store_url) as t:
        await sales.send(*SALES)
        await t.processed()
        want = expected(shape, as_events(SALES), grace)
        emitted = await arrived(t, out, len(want))
    assert want  # the data closes some windows
    assert closed_of(emitted) == want
    await app.aclose()


async def test_late_events_are_dropped_and_counted(app_name: str, store_url: str) -> None:
    app, sales = shop_app(app_name, store_url)
    per_minute, _ = build(app, sales, "tumbling", 0)

    @app.processor(sales)
    async def total(events: Any) -> None:
        async for sale in events.records():
            per_minute[sale.shop] += sale.amount

    async with run(app, store=store_url) as t:
        await sales.send(*SALES)
        await t.processed()
    late = len(reference.tumbling(60, as_events(SALES), 0).late)
    assert late > 0
    clocks = await per_minute.clocks()
    assert clocks[0].late == late
    assert clocks[0].watermark == 5000
    await app.aclose()


async def test_late_events_can_go_to_a_stream_once(app_name: str, store_url: str) -> None:
    app, sales = shop_app(app_name, store_url)
    too_late = app.stream("too_late", record=Sale, partition_by="shop", partition_count=1)
    per_minute, _ = build(app, sales, "tumbling", 0, late=too_late)

    @app.processor(sales)
    async def total(events: Any) -> None:
        async for sale in events.records():
            per_minute[sale.shop] += sale.amount

    async with run(app, store=store_url) as t:
        await sales.send(*SALES)
        await t.processed()
        wm, want = -1e18, []
        for sale in SALES:
            if (sale.at // 60 + 1) * 60 <= wm:
                want.append(sale)
            wm = max(wm, sale.at)
        sent_on = await arrived(t, too_late, len(want))
    assert sent_on == want
    await app.aclose()


async def test_windows_are_read_inside_and_outside_the_processor(
    app_name: str, store_url: str
) -> None:
    app, sales = shop_app(app_name, store_url)
    per_minute = app.table("per_minute", source=sales, default=0).tumbling(
        60, time="at", expires=3600
    )
    seen: list[Any] = []

    @app.processor(sales)
    async def total(events: Any) -> None:
        async for sale in events.records():
            per_minute[sale.shop] += sale.amount
            window = per_minute[sale.shop]
            seen.append((sale.at, window.current(), [w for w, _ in window.windows()]))

    times = [0, 30, 70, 65, 200]
    async with run(app, store=store_url) as t:
        await sales.send(*[Sale(shop="a", at=at, amount=1) for at in times])
        await t.processed()
    assert [(at, value) for at, value, _ in seen] == [(0, 1), (30, 2), (70, 1), (65, 2), (200, 1)]
    assert seen[-1][2] == [Window(0, 60), Window(60, 120), Window(180, 240)]
    # Closed windows stay readable until they expire.
    assert await per_minute.windows("a") == [
        (Window(0, 60), 2),
        (Window(60, 120), 2),
        (Window(180, 240), 1),
    ]
    assert await per_minute.windows("a", since=60, until=180) == [(Window(60, 120), 2)]
    assert await per_minute.get("a", at=61) == 2
    assert await per_minute.get("a", at=dt.datetime.fromtimestamp(10, dt.UTC)) == 2
    assert await per_minute.get("a", at=130) == 0
    assert await per_minute.get("a") == 1  # the latest window
    assert await per_minute.get("zz") == 0
    entries = [e async for e in per_minute.items()]
    assert [k for k, _ in entries] == ["a"]
    assert await per_minute.sizes() == {0: 1}
    await app.aclose()


async def test_expired_windows_are_deleted(app_name: str, store_url: str) -> None:
    app, sales = shop_app(app_name, store_url)
    per_minute = app.table("per_minute", source=sales, default=0).tumbling(
        60, time="at", expires=120
    )

    @app.processor(sales)
    async def total(events: Any) -> None:
        async for sale in events.records():
            per_minute[sale.shop] += 1

    async with run(app, store=store_url) as t:
        await sales.send(Sale(shop="a", at=0, amount=1), Sale(shop="b", at=100, amount=1))
        await t.processed()
        assert [w for w, _ in await per_minute.windows("a")] == [Window(0, 60)]
        await sales.send(Sale(shop="b", at=181, amount=1))  # past 60 + 120: "a" expires
        await t.processed()
    assert await per_minute.windows("a") == []
    assert [w for w, _ in await per_minute.windows("b")] == [Window(60, 120), Window(180, 240)]
    assert await per_minute.sizes() == {0: 1}
    await app.aclose()


async def test_a_batch_names_the_event_of_each_change(app_name: str, store_url: str) -> None:
    app, sales = shop_app(app_name, store_url)
    per_minute, out = build(app, sales, "tumbling", 0)

    @app.processor(sales)
    async def total(events: Any) -> None:
        # Batches of one: the watermark moves after each batch, as after each event.
        async for batch in events.take(1, within=0):
            for event in batch:
                per_minute.at(event)[event.record.shop] += event.record.amount
                with pytest.raises(TableError, match="say which event"):
                    per_minute[event.record.shop]

    async with run(app, store=store_url) as t:
        await sales.send(*SALES)
        await t.processed()
        want = expected("tumbling", as_events(SALES), 0)
        emitted = await arrived(t, out, len(want))
    assert closed_of(emitted) == want
    await app.aclose()


async def test_an_on_close_function_is_called_per_window(app_name: str, store_url: str) -> None:
    app, sales = shop_app(app_name, store_url)
    got: list[WindowClosed] = []

    async def closed(window: WindowClosed) -> None:
        got.append(window)

    per_minute = app.table("per_minute", source=sales, default=0).tumbling(
        60, time="at", on_close=closed
    )

    @app.processor(sales)
    async def total(events: Any) -> None:
        async for sale in events.records():
            per_minute[sale.shop] += sale.amount

    async with run(app, store=store_url) as t:
        await sales.send(*SALES)
        await t.processed()
    assert sorted((w.key, w.start, w.end, w.value) for w in got) == expected(
        "tumbling", as_events(SALES), 0
    )
    await app.aclose()


async def test_a_failed_iteration_closes_and_counts_nothing(app_name: str, store_url: str) -> None:
    app, sales = shop_app(app_name, store_url)
    per_minute, out = build(app, sales, "tumbling", 0)
    failed: set[float] = set()

    @app.processor(sales, exception_policy=ExceptionPolicy.RETRY, retries=3, retry_backoff=0.01)
    async def total(events: Any) -> None:
        async for sale in events.records():
            per_minute[sale.shop] += sale.amount
            if sale.at in (61, 10, 50) and sale.at not in failed:  # 50 is late
                failed.add(sale.at)
                raise RuntimeError("once")

    late = len(reference.tumbling(60, as_events(SALES), 0).late)
    async with run(app, store=store_url) as t:
        await sales.send(*SALES)
        await t.processed()
        want = expected("tumbling", as_events(SALES), 0)
        emitted = await arrived(t, out, len(want))
        # The metrics count what was committed, not the tries that were rolled back.
        [executor] = t.workers[0].executors
        counted = executor.stats.tables["totals"]
        assert (counted.late, counted.closed) == (late, len(want))
    assert failed == {61, 10, 50}
    assert closed_of(emitted) == want
    assert (await per_minute.clocks())[0].late == late
    await app.aclose()


async def test_the_next_owner_goes_on_from_the_committed_clock(
    app_name: str, store_url: str
) -> None:
    half = len(SALES) // 2
    for part in (SALES[:half], SALES[half:]):
        app, sales = shop_app(app_name, store_url)
        per_minute, out = build(app, sales, "session", 10)

        @app.processor(sales)
        async def total(events: Any) -> None:
            async for sale in events.records():
                per_minute[sale.shop] += sale.amount  # noqa: B023 (one app per loop)

        want = expected("session", as_events(SALES), 10)
        async with run(app, store=store_url) as t:
            await sales.send(*part)
            await t.processed()
            emitted = await arrived(t, out, len(want))
        await app.aclose()
    assert closed_of(emitted) == want


async def test_event_times_from_entry_ids_by_default(app_name: str, store_url: str) -> None:
    app, sales = shop_app(app_name, store_url)
    per_hour = app.table("per_hour", source=sales, default=0).tumbling(3600)

    @app.processor(sales)
    async def total(events: Any) -> None:
        async for sale in events.records():
            per_hour[sale.shop] += 1

    async with run(app, store=store_url) as t:
        await sales.send(*[Sale(shop="a", at=0, amount=1) for _ in range(3)])
        await t.processed()
    [(window, count)] = await per_hour.windows("a")
    assert count == 3
    assert window.end - window.start == 3600
    assert window.start <= dt.datetime.now(dt.UTC).timestamp() < window.end + 5
    await app.aclose()


def test_declarations_are_checked(app_name: str) -> None:
    app, sales = shop_app(app_name)
    table = app.table("t", source=sales)
    with pytest.raises(Misconfigured, match="expires"):
        app.table("u", source=sales).tumbling(60, grace=10, expires=5)
    with pytest.raises(Misconfigured, match="grace must be"):
        app.table("v", source=sales).tumbling(60, grace=-1)
    with pytest.raises(Misconfigured, match="late is 'drop' or a Stream"):
        app.table("w", source=sales).tumbling(60, late="keep")
    with pytest.raises(ValueError, match="step"):
        app.table("x", source=sales).hopping(60, 90)
    windowed = table.tumbling(60)
    assert app.tables["t"] is windowed
    assert sales.tables[0] is windowed
    with pytest.raises(Misconfigured, match="windowed already"):
        table.tumbling(60)


@pytest.mark.parametrize("bad", ["noon", math.nan, -math.inf], ids=["text", "nan", "-inf"])
async def test_bad_event_times_fail_the_event(app_name: str, store_url: str, bad: Any) -> None:
    """A NaN or an infinity too, named as such: before, it failed deep in the window
    arithmetic ("cannot convert float NaN to integer")."""
    app, sales = shop_app(app_name, store_url)
    per_minute = app.table("per_minute", source=sales, default=0).tumbling(
        60, time=lambda sale: bad
    )

    @app.processor(sales, exception_policy=ExceptionPolicy.IGNORE)
    async def total(events: Any) -> None:
        async for sale in events.records():
            per_minute[sale.shop] += 1

    async with run(app, store=store_url) as t:
        await sales.send(Sale(shop="a", at=0, amount=1))
        await t.processed()
        [failure] = t.failures
    assert isinstance(failure.exception, TableError)
    assert "event time must be a finite number of seconds" in str(failure.exception)
    assert await per_minute.windows("a") == []
    await app.aclose()
