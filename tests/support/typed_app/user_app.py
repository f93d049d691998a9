"""A user's app, as the README and the guides show it, fully annotated: ``mypy --strict``
finds nothing in it (tests/unit/test_typing.py)."""

from __future__ import annotations

import asyncio
from datetime import datetime

import runnel.testing
from runnel import App, Events, Record, Stream, WindowClosed, chain, chord, group
from runnel.jobs import JobResult

app = App(name="shop", redis_url="memory://")


class Item(Record):
    sku: str
    quantity: int
    price: float


class Order(Record):
    order_id: int
    customer: str
    created_at: datetime
    items: list[Item]


orders = app.stream("orders", record=Order, partition_by="customer", partition_count=4)
totals_out = app.stream("totals", record=Item, partition_by="sku")
counts = app.table("counts", source=orders, default=0)
closed = app.stream("closed", record=WindowClosed, partition_by="key")
per_minute = app.table("per_minute", source=orders, default=0).tumbling(
    60, time="created_at", on_close=closed
)
untyped: Stream = orders


@app.processor(orders)
async def totals(events: Events[Order]) -> None:
    async for order in events.records():
        total: float = sum(item.quantity * item.price for item in order.items)
        counts[order.customer] += 1
        await events.send(totals_out, Item(sku=order.customer, quantity=1, price=total))


@app.processor(orders, name="batches")
async def in_batches(events: Events) -> None:
    async for batch in events.take(10, within=1.0).records():
        print(len(batch))


@app.processor(orders, name="minutes")
async def minutes(events: Events[Order]) -> None:
    async for order in events.records():
        per_minute[order.customer] += 1


@app.processor(closed)
async def minute_totals(events: Events[WindowClosed]) -> None:
    async for window in events.records():
        print(window.key, window.value)


@app.task
async def hello() -> None:
    print("started")


@app.task(on_leader=True)
async def lead() -> None:
    print("leader")


@app.timer(interval=5)
async def tick() -> None:
    print("tick")


@app.crontab("0 * * * *")
async def hourly() -> None:
    print("hourly")


@app.job(retries=3, timeout=60)
async def resize(image_id: int, width: int = 100) -> str:
    return f"images/{image_id}-{width}.png"


@app.job
def add(x: int, y: int) -> int:
    return x + y


@app.job
def total(values: list[int]) -> int:
    return sum(values)


async def main() -> None:
    await orders.send(Order(order_id=1, customer="ada", created_at=datetime.now(), items=[]))
    result: JobResult[str] = await resize.delay(7, width=200)
    path: str = await result.get(timeout=10)
    later = await resize.delay(7, countdown=5)
    print(path, await later.status(), await counts.get("ada"))
    await chord(group(add.s(i, i) for i in range(10)), total.s()).delay()
    await chain(add.s(1, 2), add.s(3)).delay()
    async with runnel.testing.run(app) as t:
        await orders.send(Order(order_id=2, customer="bob", created_at=datetime.now(), items=[]))
        await t.processed()
        acked = await t.acknowledged("totals")
        print(len(acked))


def sync_code() -> int:
    done = add.delay_sync(1, 2)
    return done.get(timeout=10) + add(3, 4)


def sync_test() -> None:
    with runnel.testing.run_sync(app) as t:
        t.send(orders, Order(order_id=3, customer="cy", created_at=datetime.now(), items=[]))
        t.processed()
        assert len(t.acknowledged("totals")) == 1


if __name__ == "__main__":
    asyncio.run(main())
