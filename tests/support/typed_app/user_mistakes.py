"""A user's app with mistakes a type checker must find: each line marked ``# E: code``
must get that error from ``mypy --strict``, and no other line any."""

from __future__ import annotations

from datetime import datetime

from runnel import App, Events, Record

app = App(name="shop", redis_url="memory://")


class Item(Record):
    sku: str


class Order(Record):
    order_id: int
    customer: str


orders = app.stream("orders", record=Order, partition_by="customer")
items = app.stream("items", record=Item, partition_by="sku")


@app.processor(orders)
async def totals(events: Events[Order]) -> None:
    async for order in events.records():
        print(order.total)  # E: attr-defined
        await events.send(items, order)  # E: misc


@app.processor(orders)  # E: arg-type
async def of_items(events: Events[Item]) -> None:
    async for item in events.records():
        print(item.sku)


@app.job
async def resize(image_id: int, width: int = 100) -> str:
    return f"images/{image_id}-{width}.png"


async def main() -> None:
    await resize.delay("seven")  # E: call-overload
    resize.delay_sync(7, height=3)  # E: call-overload
    result = await resize.delay(7, width=200)
    count: int = await result.get()  # E: assignment
    print(count, resize.delay_sync(7).get() + 1)  # E: operator
    await orders.send(Item(sku="tea"))  # E: arg-type
    await orders.send(Order(order_id=1, customer="ada", created=datetime.now()))  # E: call-arg
