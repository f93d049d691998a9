"""Events through processors: order per key, acknowledgements, several workers."""

from __future__ import annotations

from runnel import App, Events, Record
from runnel.testing import run


class Order(Record):
    id: int
    user: str


def make(app_name: str) -> tuple[App, list[Order]]:
    app = App(name=app_name)
    orders = app.stream("orders", record=Order, partition_by="user", partition_count=4)
    seen: list[Order] = []

    @app.processor(orders)
    async def record(events: Events) -> None:
        async for order in events.records():
            seen.append(order)

    return app, seen


async def test_every_event_is_processed_in_order_per_key(app_name: str, store_url: str) -> None:
    app, seen = make(app_name)
    orders = app.streams["orders"]
    async with run(app, store=store_url) as t:
        sent = [Order(id=i, user=f"u{i % 5}") for i in range(40)]
        await orders.send(*sent)
        await t.processed()
        assert sorted(o.id for o in seen) == list(range(40))
        for user in {o.user for o in sent}:
            assert [o.id for o in seen if o.user == user] == [o.id for o in sent if o.user == user]
        acked = await t.acknowledged("record")
        assert sorted(o.id for o in acked) == list(range(40))
