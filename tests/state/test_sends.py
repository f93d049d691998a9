"""What a processor sends with ``events.send`` is appended with the acknowledgement of
the event that sent it: once each (never for an iteration that failed), in order per
source partition; on ``memory://``, Redis and a Redis Cluster (through its outbox)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from runnel import App, ExceptionPolicy, Record
from runnel.testing import run


class Order(Record):
    customer: str
    n: int


class Shipped(Record):
    customer: str
    n: int
    source: int


async def test_each_record_sent_arrives_once_in_order(app_name: str, store_url: str) -> None:
    app = App(name=app_name, redis_url=store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=4)
    shipped = app.stream("shipped", record=Shipped, partition_by="customer", partition_count=3)
    failed: set[int] = set()
    got: list[Shipped] = []

    @app.processor(orders, exception_policy=ExceptionPolicy.RETRY, retries=3, retry_backoff=0.01)
    async def ship(events: Any) -> None:
        async for order in events.records():
            source = orders.partition_number(order)
            await events.send(shipped, Shipped(customer=order.customer, n=order.n, source=source))
            if order.n % 7 == 0 and order.n not in failed:
                failed.add(order.n)
                raise RuntimeError("sent, then failed: the send must not count")

    @app.processor(shipped)
    async def receive(events: Any) -> None:
        async for record in events.records():
            got.append(record)

    sent = [Order(customer=f"c{i % 11}", n=i) for i in range(300)]
    async with run(app, store=store_url) as t:
        await orders.send(*sent)
        await t.processed()  # what was sent arrived and was processed too (relayed, on a cluster)
    assert sorted(r.n for r in got) == list(range(300))
    per_source: dict[tuple[int, str], list[int]] = defaultdict(list)
    for record in got:
        per_source[record.source, record.customer].append(record.n)
    assert all(ns == sorted(ns) for ns in per_source.values())
    await app.aclose()


async def test_an_ignored_event_sends_nothing(app_name: str, store_url: str) -> None:
    app = App(name=app_name, redis_url=store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=2)
    shipped = app.stream("shipped", record=Shipped, partition_by="customer", partition_count=2)
    got: list[int] = []

    @app.processor(orders, exception_policy=ExceptionPolicy.IGNORE)
    async def ship(events: Any) -> None:
        async for order in events.records():
            await events.send(shipped, Shipped(customer=order.customer, n=order.n, source=0))
            if order.n % 2:
                raise RuntimeError("odd")

    @app.processor(shipped)
    async def receive(events: Any) -> None:
        async for record in events.records():
            got.append(record.n)

    async with run(app, store=store_url) as t:
        await orders.send(*[Order(customer=f"c{i % 3}", n=i) for i in range(40)])
        await t.processed()
        await t.processed()
    assert sorted(got) == list(range(0, 40, 2))
    await app.aclose()


async def test_a_job_enqueued_from_a_processor_is_created_once(
    app_name: str, store_url: str
) -> None:
    app = App(name=app_name, redis_url=store_url)
    orders = app.stream("orders", record=Order, partition_by="customer", partition_count=2)
    ran: list[int] = []
    failed: set[int] = set()

    @app.job()
    async def invoice(n: int) -> int:
        ran.append(n)
        return n

    @app.processor(orders, exception_policy=ExceptionPolicy.RETRY, retries=3, retry_backoff=0.01)
    async def bill(events: Any) -> None:
        async for order in events.records():
            await events.delay(invoice, order.n)
            if order.n % 5 == 0 and order.n not in failed:
                failed.add(order.n)
                raise RuntimeError("enqueued, then failed: the retry enqueues the same id")

    async with run(app, store=store_url) as t:
        await orders.send(*[Order(customer=f"c{i % 3}", n=i) for i in range(30)])
        await t.processed()
        await t.join()
    assert sorted(ran) == list(range(30))
    await app.aclose()
