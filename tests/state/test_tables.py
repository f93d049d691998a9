"""Tables in a processor, end to end with real workers in this process, on every store:
what a processor writes is committed with the acknowledgement of the event that wrote it,
read back by anyone, loaded by the next owner, and rolled back when the event fails."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from typing import Any

import pytest

from runnel import App, ExceptionPolicy, Record
from runnel.exceptions import Misconfigured, TableError, WrongPartition
from runnel.testing import run
from tests.support import servers

PARTITIONS = 4


class Order(Record):
    customer: str
    amount: int


class Total(Record):
    count: int
    amount: int


def shop(app_name: str, store_url: str, **settings: Any) -> App:
    return App(name=app_name, redis_url=store_url, **settings)


def orders_of(n: int) -> list[Order]:
    return [Order(customer=f"c{i % 9}", amount=i) for i in range(n)]


async def test_counts_per_key_are_committed_and_read_back(app_name: str, store_url: str) -> None:
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=4)
    counts = app.table("counts", source=orders, default=0)
    sums = app.table("sums", source=orders, record=Total)

    @app.processor(orders)
    async def tally(events: Any) -> None:
        async for order in events.records():
            counts[order.customer] += 1
            before = sums[order.customer] or Total(count=0, amount=0)
            sums[order.customer] = Total(
                count=before.count + 1, amount=before.amount + order.amount
            )

    sent = orders_of(500)
    async with run(app, store=store_url) as t:
        await orders.send(*sent)
        await t.processed()
    expected = Counter(o.customer for o in sent)
    for customer, count in expected.items():
        assert await counts.get(customer) == count
        total = await sums.get(customer)
        assert total == Total(
            count=count, amount=sum(o.amount for o in sent if o.customer == customer)
        )
    assert await counts.get("nobody") == 0
    assert sum((await counts.sizes()).values()) == len(expected)
    assert dict([kv async for kv in counts.items()]) == dict(expected)
    await app.aclose()


async def test_a_batch_commits_its_changes_with_its_acknowledgement(
    app_name: str, store_url: str
) -> None:
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=2)
    counts = app.table("counts", source=orders, default=0)

    @app.processor(orders)
    async def tally(events: Any) -> None:
        async for batch in events.take(20, within=0.05).records():
            for order in batch:
                counts[order.customer] += order.amount

    sent = orders_of(300)
    async with run(app, store=store_url) as t:
        await orders.send(*sent)
        await t.processed()
    for customer in {o.customer for o in sent}:
        assert await counts.get(customer) == sum(o.amount for o in sent if o.customer == customer)
    await app.aclose()


async def test_a_failed_iteration_changes_nothing_and_its_retry_counts_once(
    app_name: str, store_url: str
) -> None:
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=2)
    counts = app.table("counts", source=orders, default=0)
    failures: dict[int, int] = {}

    @app.processor(orders, exception_policy=ExceptionPolicy.RETRY, retries=5, retry_backoff=0.01)
    async def tally(events: Any) -> None:
        async for order in events.records():
            counts[order.customer] += 1
            if order.amount % 10 == 0 and failures.get(order.amount, 0) < 2:
                failures[order.amount] = failures.get(order.amount, 0) + 1
                raise RuntimeError("not this time")

    sent = orders_of(100)
    async with run(app, store=store_url) as t:
        await orders.send(*sent)
        await t.processed()
    for customer, count in Counter(o.customer for o in sent).items():
        assert await counts.get(customer) == count
    assert sum(failures.values()) == 20
    await app.aclose()


async def test_an_ignored_event_applies_nothing(app_name: str, store_url: str) -> None:
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=2)
    counts = app.table("counts", source=orders, default=0)

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE)
    async def tally(events: Any) -> None:
        async for order in events.records():
            counts[order.customer] += 1
            if order.amount % 2:
                raise RuntimeError("odd")

    sent = orders_of(90)
    async with run(app, store=store_url) as t:
        await orders.send(*sent)
        await t.processed()
    for customer in {o.customer for o in sent}:
        evens = sum(1 for o in sent if o.customer == customer and o.amount % 2 == 0)
        assert await counts.get(customer) == evens
    await app.aclose()


async def test_a_commit_made_while_an_iteration_waits_leaves_its_changes_out(
    app_name: str, store_url: str
) -> None:
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=1)
    counts = app.table("counts", source=orders, default=0)
    finished = [0]
    seen: list[tuple[int, int]] = []

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE)
    async def tally(events: Any) -> None:
        async for order in events.records():
            counts["all"] += 1
            counts[order.customer] = order.amount  # a key earlier iterations changed too
            await asyncio.sleep(0.02)  # the events before this one are committed meanwhile
            seen.append((finished[0], await counts.get("all")))
            if order.amount % 3 == 2:
                raise RuntimeError("rolled back after a commit of the events before it")
            finished[0] += 1

    sent = orders_of(30)
    async with run(app, store=store_url) as t:
        await orders.send(*sent)
        await t.processed()
    assert all(committed <= before for before, committed in seen), seen
    assert any(committed == before > 0 for before, committed in seen)  # commits did happen
    assert await counts.get("all") == 20
    kept = [o for o in sent if o.amount % 3 != 2]
    for customer in {o.customer for o in sent}:
        last = [o.amount for o in kept if o.customer == customer]
        assert await counts.get(customer) == (last[-1] if last else 0)
    await app.aclose()


async def test_the_next_owner_goes_on_from_the_committed_state(
    app_name: str, store_url: str
) -> None:
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=4)
    counts = app.table("counts", source=orders, default=0)

    @app.processor(orders)
    async def tally(events: Any) -> None:
        async for order in events.records():
            counts[order.customer] += 1

    first, second = orders_of(200), orders_of(300)
    async with run(app, store=store_url) as t:
        await orders.send(*first)
        await t.processed()
    async with run(app, store=store_url) as t:  # a new worker: nothing cached
        await orders.send(*second)
        await t.processed()
    for customer, count in Counter(o.customer for o in first + second).items():
        assert await counts.get(customer) == count
    await app.aclose()


async def test_keys_no_event_brought_are_read_and_written_too(
    app_name: str, store_url: str
) -> None:
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=1)
    totals = app.table("totals", source=orders, default=0)

    @app.processor(orders)
    async def tally(events: Any) -> None:
        async for order in events.records():
            totals["all"] += order.amount  # one partition: every key is ours
            await totals.load("seen")
            totals["seen"] += 1
            assert "all" in totals
            del totals["never"]

    sent = orders_of(50)
    async with run(app, store=store_url) as t:
        await orders.send(*sent)
        await t.processed()
    assert await totals.get("all") == sum(o.amount for o in sent)
    assert await totals.get("seen") == 50
    assert await totals.get("never", "absent") == "absent"
    await app.aclose()


async def test_a_key_of_another_partition_is_refused_naming_both(
    app_name: str, store_url: str
) -> None:
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=4)
    counts = app.table("counts", source=orders, default=0)
    errors: list[BaseException] = []

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE)
    async def tally(events: Any) -> None:
        async for order in events.records():
            other = next(
                f"x{i}" for i in range(100) if orders.hash(f"x{i}") != orders.hash(order.customer)
            )
            try:
                counts[other] += 1
            except WrongPartition as exc:
                errors.append(exc)

    async with run(app, store=store_url) as t:
        await orders.send(Order(customer="ada", amount=1))
        await t.processed()
    [error] = errors
    assert f"partition {orders.hash('ada')}" in str(error)
    assert "belongs to partition" in str(error)
    assert sum((await counts.sizes()).values()) == 0
    await app.aclose()


async def test_a_key_of_the_wrong_type_is_refused_as_such_wherever_it_hashes(
    app_name: str, store_url: str
) -> None:
    """A bytes key of a table keyed by str: one TableError naming the key type, whether its
    hash falls in the event's partition (it used to fail as a key that cannot be stored)
    or in another (it used to fail as WrongPartition). A computed key is checked as JSON."""
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=4)
    by_pair = app.stream(
        "pairs", record=Order, partition_by=lambda o: (o.customer, o.amount), partition_count=4
    )
    counts = app.table("counts", source=orders, default=0)
    pairs = app.table("pairs", source=by_pair, default=0)
    here = orders.hash("ada")
    same = next(k for i in range(100) if orders.hash(k := f"b{i}".encode()) == here)
    other = next(k for i in range(100) if orders.hash(k := f"b{i}".encode()) != here)
    errors: list[tuple[type, str]] = []

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE)
    async def tally(events: Any) -> None:
        async for order in events.records():
            for key in (same, other, 42):
                try:
                    counts[key] += 1
                except TableError as exc:
                    errors.append((type(exc), str(exc)))
            counts[order.customer] += 1

    @app.processor(by_pair, exception_policy=ExceptionPolicy.IGNORE)
    async def pair(events: Any) -> None:
        async for order in events.records():
            try:
                pairs[(order.customer, b"raw")] = 1
            except TableError as exc:
                errors.append((type(exc), str(exc)))

    async with run(app, store=store_url) as t:
        await orders.send(Order(customer="ada", amount=1))
        await by_pair.send(Order(customer="ada", amount=1))
        await t.processed()
    keyed = "table 'counts' is keyed by str (field 'customer' of stream 'orders')"
    assert set(errors) == {
        (TableError, f"{keyed}, not bytes: {same!r}"),
        (TableError, f"{keyed}, not bytes: {other!r}"),
        (TableError, f"{keyed}, not int: 42"),
        (
            TableError,
            "table 'pairs': a table key must be JSON (text, a number, a tuple of them): "
            "('ada', b'raw')",
        ),
    }
    assert len(errors) == 4
    with pytest.raises(TableError, match=r"keyed by str .*not bytes: b'raw'"):
        await counts.get(b"raw")
    assert await counts.get("ada") == 1
    await app.aclose()


async def test_outside_the_processor_a_table_is_read_with_get(
    app_name: str, store_url: str
) -> None:
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer")
    counts = app.table("counts", source=orders, default=0)
    with pytest.raises(TableError, match=r"await table\.get"):
        counts["ada"] += 1
    assert await counts.get("ada") == 0
    await app.aclose()


async def test_a_second_processor_may_not_write_the_table(app_name: str, store_url: str) -> None:
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=1)
    counts = app.table("counts", source=orders, default=0)
    refused: list[BaseException] = []
    claimed = asyncio.Event()  # the first to write claims the table: make it "first"

    @app.processor(orders)
    async def first(events: Any) -> None:
        async for order in events.records():
            counts[order.customer] += 1
            claimed.set()

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE)
    async def second(events: Any) -> None:
        async for order in events.records():
            await claimed.wait()
            try:
                counts[order.customer] = -1
            except TableError as exc:
                refused.append(exc)
            assert await counts.get(order.customer) >= 0  # reading committed values is fine

    async with run(app, store=store_url) as t:
        await orders.send(*orders_of(5))
        await t.processed()
    assert refused and "written by processor 'first'" in str(refused[0])
    await app.aclose()


async def test_a_value_that_cannot_be_encoded_fails_the_event_and_commits_nothing(
    app_name: str, store_url: str
) -> None:
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=1)
    counts = app.table("counts", source=orders, default=0)

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE)
    async def tally(events: Any) -> None:
        async for order in events.records():
            counts[order.customer] += 1
            if order.amount == 3:
                counts["bad"] = object()  # JSON cannot carry it

    async with run(app, store=store_url) as t:
        await orders.send(*[Order(customer="ada", amount=i) for i in range(5)])
        await t.processed()
        assert len(t.failures) == 1
        assert "cannot encode the table value" in str(t.failures[0].exception)
    assert await counts.get("ada") == 4
    assert await counts.get("bad") == 0
    await app.aclose()


@pytest.mark.parametrize(
    "bad",
    [math.nan, -math.inf, (1, math.nan), "caf\udce9", b"\xff", frozenset({1})],
    ids=["nan", "-inf", "nan-in-tuple", "lone-surrogate", "bytes", "frozenset"],
)
async def test_a_value_json_cannot_carry_fails_its_event_not_the_commit(
    app_name: str, store_url: str, bad: Any
) -> None:
    """Before, a NaN was committed as null (read back None), and an immutable value that
    could not be encoded was encoded only at the commit, which crashed the worker."""
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=1)
    counts = app.table("counts", source=orders, default=0)
    last = app.table("last", source=orders, default=None)

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE)
    async def tally(events: Any) -> None:
        async for order in events.records():
            counts[order.customer] += 1
            last[order.customer] = bad if order.amount == 3 else order.amount

    async with run(app, store=store_url) as t:
        await orders.send(*[Order(customer="ada", amount=i) for i in range(6)])
        await t.processed()
        assert len(t.failures) == 1
        assert "cannot encode the table value" in str(t.failures[0].exception)
    assert await counts.get("ada") == 5
    assert await last.get("ada") == 5
    await app.aclose()


async def test_a_nan_key_is_refused(app_name: str, store_url: str) -> None:
    """JSON writes NaN as null: the key would have been None's. (Keys computed by a
    function, one partition: any JSON-able key is the partition's.)"""
    app = shop(app_name, store_url)
    orders = app.stream(
        "orders", record=Order, partition_by=lambda o: o.customer, partition_count=1
    )
    counts = app.table("counts", source=orders, default=0)
    refused: list[str] = []

    @app.processor(orders)
    async def tally(events: Any) -> None:
        async for order in events.records():
            try:
                counts[(order.customer, math.nan)] = 1
            except TableError as exc:
                refused.append(str(exc))
            counts[(order.customer, None)] = 2

    async with run(app, store=store_url) as t:
        await orders.send(Order(customer="ada", amount=1))
        await t.processed()
    assert len(refused) == 1 and "nan: JSON has no NaN or infinity" in refused[0]
    assert await counts.get(("ada", None)) == 2
    await app.aclose()


@pytest.mark.parametrize("windowed", [False, True], ids=["table", "windowed"])
async def test_a_key_no_table_can_hold_fails_its_event_under_the_policy(
    app_name: str, store_url: str, windowed: bool
) -> None:
    """A key computed as a list cannot be a table key: before, loading the buffered events'
    keys raised outside any event (halting the worker, or under IGNORE stopping the
    partition for good). Now its event fails in the processor, where it is used."""
    app = shop(app_name, store_url)
    orders = app.stream(
        "orders",
        record=Order,
        partition_by=lambda o: [o.customer] if o.customer == "bad" else o.customer,
        partition_count=1,
    )
    table = app.table("counts", source=orders, default=0)
    counts: Any = table.tumbling(3600) if windowed else table

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE)
    async def tally(events: Any) -> None:
        async for order in events.records():
            key = orders.key_of(order)
            counts[key] += 1

    sent = [Order(customer=c, amount=i) for i, c in enumerate(["ada", "bad", "ada", "bob"])]
    async with run(app, store=store_url) as t:
        await orders.send(*sent)
        await t.processed()
        assert len(t.failures) == 1
        assert "a list key can be made a tuple" in str(t.failures[0].exception)
        assert len(await t.acknowledged("tally")) == 4
    await app.aclose()


def test_declarations_are_checked(app_name: str) -> None:
    app = App(name=app_name, redis_url="memory://")
    orders = app.stream("orders", record=Order, partition_by="customer")
    app.table("counts", source=orders)
    with pytest.raises(Misconfigured, match="already declared"):
        app.table("counts", source=orders)
    with pytest.raises(Misconfigured, match="needs a source Stream"):
        app.table("other", source="orders")  # type: ignore[arg-type]
    with pytest.raises(Misconfigured, match="Record subclass"):
        app.table("third", source=orders, record=dict)  # type: ignore[arg-type]


async def test_clearing_all_of_a_table_reaches_the_partitions_it_was_built_with(
    app_name: str, store_url: str
) -> None:
    """Cleared while its stream is declared with fewer partitions (as the refusal of a
    changed partition count advises), the partitions past the new count go too: their
    state would otherwise outlive the count that was forgotten."""
    app = shop(app_name, store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=4)
    counts = app.table("counts", source=orders, default=0)

    @app.processor(orders)
    async def tally(events: Any) -> None:
        async for order in events.records():
            counts[order.customer] += 1

    async with run(app, store=store_url) as t:
        await orders.send(*orders_of(90))
        await t.processed()
    sizes = await counts.sizes()
    assert sizes[2] + sizes[3] > 0  # state past the count declared next

    fewer = shop(app_name, store_url)
    narrowed = fewer.stream("orders", record=Order, partition_by="customer", partition_count=2)
    await fewer.table("counts", source=narrowed, default=0).clear()
    assert sum((await counts.sizes()).values()) == 0
    await fewer.aclose()
    await app.aclose()


def cache_watched(app_name: str, store_url: str, cache_size: int) -> tuple[Any, ...]:
    """A count per customer over 4 partitions with a cache of ``cache_size`` values: the
    app, stream and table, the budget each event saw, and how many values it caches now."""
    from runnel.tables.base import current

    app = shop(app_name, store_url, table_cache_size=cache_size)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=4)
    counts = app.table("counts", source=orders, default=0)
    budgets: list[Any] = []

    @app.processor(orders)
    async def tally(events: Any) -> None:
        async for order in events.records():
            counts[order.customer] += 1
            state = current.get()
            assert state is not None
            budgets.append(state.views["counts"].budget)

    def cached() -> int:
        return sum(len(v.values) for v in budgets[-1].views)

    return app, orders, counts, budgets, cached


async def test_a_small_cache_evicts_committed_values_and_counts_stay_exact(
    app_name: str, store_url: str
) -> None:
    """``table_cache_size`` bounds the values a worker keeps per table, over all the
    partitions it owns; evicted keys are read again from the store, so nothing is lost."""
    app, orders, counts, budgets, cached = cache_watched(app_name, store_url, 8)

    sent = [Order(customer=f"c{i % 60}", amount=i) for i in range(1200)]
    async with run(app, store=store_url) as t:
        await orders.send(*sent)
        await t.processed()
        assert len({id(b) for b in budgets}) == 1  # one budget for every partition
        assert len(budgets[-1].views) == 4
        while cached() > 8:  # noqa: ASYNC110 (each partition trims at its next commit)
            await asyncio.sleep(0.01)
    expected = Counter(o.customer for o in sent)
    assert dict([kv async for kv in counts.items()]) == dict(expected)
    await app.aclose()


async def test_a_partition_holding_few_keys_is_read_once_not_per_new_key(
    app_name: str, redis_url: str, redis_client: Any
) -> None:
    """The owner's first load of a partition holding few keys reads all of them, so that
    a key first seen later needs no read of its own (HMGET) whether it is stored or not;
    values already committed are read back from that one read."""
    app = shop(app_name, redis_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=4)
    counts = app.table("counts", source=orders, default=0)

    @app.processor(orders)
    async def tally(events: Any) -> None:
        async for order in events.records():
            counts[order.customer] += 1

    first = orders_of(90)  # c0..c8
    second = [Order(customer=f"c{i // 20}", amount=i) for i in range(360)]  # c0..c17 in turn
    for batch in (first, second):  # the second: a new worker, with committed keys
        servers.admin(redis_client, "CONFIG", "RESETSTAT")
        async with run(app, store=redis_url) as t:
            for i in range(0, len(batch), 30):  # keys first seen in several reads
                await orders.send(*batch[i : i + 30])
                await t.processed()
        stats = redis_client.info("commandstats")
        none = {"calls": 0}
        # One per partition (its first load), and the check of the tables' partition counts.
        assert stats.get("cmdstat_hmget", none)["calls"] <= 4 + 1
    for customer, count in Counter(o.customer for o in first + second).items():
        assert await counts.get(customer) == count
    await app.aclose()


async def test_a_churned_cache_takes_the_memory_of_its_keys_not_twice(
    app_name: str, store_url: str
) -> None:
    """Evicting and loading distinct keys without end must not regrow a partition's cache:
    a dict resized by churn takes twice what the same keys take inserted once (the peak
    worker RSS of a table of 1M keys grew 6 MB over 100k before its cache was copied)."""
    import sys
    from collections import OrderedDict

    app, orders, counts, budgets, cached = cache_watched(app_name, store_url, 2000)

    sent = [Order(customer=f"c{i}", amount=i) for i in range(8000)]  # 4 times the cache
    async with run(app, store=store_url) as t:
        await orders.send(*sent)
        await t.processed()
        while cached() > 2000:  # noqa: ASYNC110 (each partition trims at its next commit)
            await asyncio.sleep(0.01)
        for view in budgets[-1].views:
            once = sys.getsizeof(OrderedDict(view.values))
            assert sys.getsizeof(view.values) < 1.5 * once
    assert await counts.get("c7999") == 1
    await app.aclose()


async def test_an_events_key_is_loaded_before_the_processor_gets_it_even_after_evictions(
    app_name: str, store_url: str
) -> None:
    """Keys are loaded for the events buffered, in one read per table; a commit evicting
    from a small cache meanwhile may take some of them out again: they are loaded again
    before their events are handed over, never read one by one while the loop waits."""
    from runnel.tables.base import current

    app = shop(app_name, store_url, table_cache_size=8)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=4)
    counts = app.table("counts", source=orders, default=0)
    unloaded: list[str] = []

    @app.processor(orders, prefetch_count=16)
    async def tally(events: Any) -> None:
        async for order in events.records():
            state = current.get()
            assert state is not None
            if order.customer not in state.views["counts"].values:
                unloaded.append(order.customer)
            counts[order.customer] += 1

    sent = [Order(customer=f"c{i % 60}", amount=i) for i in range(1200)]
    async with run(app, store=store_url) as t:
        await orders.send(*sent)
        await t.processed()
    assert unloaded == []
    expected = Counter(o.customer for o in sent)
    assert dict([kv async for kv in counts.items()]) == dict(expected)
