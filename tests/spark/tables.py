"""Tables the Spark tests read; Spark's Python workers import this module.

The tests fill them by running ``tally``, ``peak`` and ``visit`` in-process
(``runnel.testing.run``) against the store under test, and give Spark its URL as ``url``.
A sale with a negative amount makes ``tally`` store text in ``counts`` (a value that does
not fit its bigint column).
"""

from __future__ import annotations

from typing import Any

from runnel import App, Record

# Spark is always given the URL: nothing listens here, so a read that used the app's own
# store instead would fail (and start no development server).
app = App(name="sparktab", redis_url="redis://127.0.0.1:9/0")

PARTITIONS = 4


class Sale(Record):
    shop: str
    at: float
    amount: int


class Total(Record):
    count: int
    amount: int


class Reading(Record):
    sensor: int
    value: float


class Visit(Record):
    user: str
    day: int


sales = app.stream("sales", record=Sale, partition_by="shop", partition_count=PARTITIONS)
counts = app.table("counts", source=sales, default=0)
totals = app.table("totals", source=sales, record=Total)
minutes = app.table("minutes", source=sales, default=0)
per_minute = minutes.tumbling(60, time="at", expires=100_000)

readings = app.stream("readings", record=Reading, partition_by="sensor", partition_count=3)
peaks = app.table("peaks", source=readings, default=0.0)

visits = app.stream("visits", record=Visit, partition_by=lambda v: v.user, partition_count=2)
days = app.table("days", source=visits, default=[])


@app.processor(sales)
async def tally(events: Any) -> None:
    async for sale in events.records():
        if sale.amount < 0:
            counts[sale.shop] = "refund"
            continue
        counts[sale.shop] += 1
        before = totals[sale.shop] or Total(count=0, amount=0)
        totals[sale.shop] = Total(count=before.count + 1, amount=before.amount + sale.amount)
        per_minute[sale.shop] += sale.amount


@app.processor(readings)
async def peak(events: Any) -> None:
    async for reading in events.records():
        peaks[reading.sensor] = max(peaks[reading.sensor], reading.value)


@app.processor(visits)
async def visit(events: Any) -> None:
    async for v in events.records():
        days[v.user] = [*days[v.user], v.day]
