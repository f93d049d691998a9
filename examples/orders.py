"""The README example: orders partitioned by customer, totalled by a processor."""

from datetime import datetime

from runnel import App, Record

app = App(name="example")


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


@app.processor(orders)
async def totals(events):
    async for order in events.records():
        total = sum(item.quantity * item.price for item in order.items)
        print(f"order {order.order_id} from {order.customer}: {total:.2f}", flush=True)
