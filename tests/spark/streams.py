"""Records and streams the Spark tests use; Spark's Python workers import this module.

The app's Redis URL is set by the tests (the session's redis-server has no fixed port);
Spark is always given it as the ``url`` option.
"""

from __future__ import annotations

import datetime
import enum
import os

import redis
from pydantic import condecimal

from runnel import App, Record

app = App(name="sparkt")

PARTITIONS = 4


class Status(enum.Enum):
    NEW = "new"
    PAID = "paid"


class Size(enum.Enum):
    SMALL = 1
    LARGE = "L"


class Item(Record):
    sku: str
    quantity: int
    price: condecimal(max_digits=12, decimal_places=2)  # type: ignore[valid-type]


class Order(Record):
    order_id: int
    customer: str
    status: Status
    size: Size = Size.SMALL
    created_at: datetime.datetime
    day: datetime.date
    items: list[Item]
    tags: dict[str, int] = {}
    note: str | None = None
    blob: bytes = b""
    ratio: float = 0.0


class Click(Record, primitive=True):
    user: str
    n: int
    ok: bool
    score: float


class Ping(Record):
    key: str
    n: int


class Reading(Record):
    key: str
    value: float


CODECS = ["json", "msgpack", "json+gzip", "avro"]

orders = {
    codec: app.stream(
        f"orders.{codec}",
        record=Order,
        partition_by="customer",
        partition_count=PARTITIONS,
        serializer=codec,
    )
    for codec in CODECS
}
orders_out = {
    codec: app.stream(
        f"orders_out.{codec}",
        record=Order,
        partition_by="customer",
        partition_count=PARTITIONS,
        serializer=codec,
    )
    for codec in CODECS
}
orders_json, orders_avro = orders["json"], orders["avro"]
orders_json_out, orders_avro_out = orders_out["json"], orders_out["avro"]

clicks = app.stream("clicks", record=Click, partition_by="user", partition_count=PARTITIONS)
clicks_out = app.stream("clicks_out", record=Click, partition_by="user", partition_count=PARTITIONS)

pings = app.stream("pings", record=Ping, partition_by="key", partition_count=PARTITIONS)
readings = {
    codec: app.stream(f"readings.{codec}", record=Reading, partition_by="key", serializer=codec)
    for codec in ("json", "msgpack")
}
pings_out = app.stream("pings_out", record=Ping, partition_by="key", partition_count=PARTITIONS)

_client: redis.Redis | None = None


@app.processor(pings_out)
async def record_pings(events):
    """Note every event, in the order this worker got it, as "key:n" in the list "seen"."""
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ["RUNNEL_REDIS_URL"])
    async for ping in events.records():
        _client.rpush("seen", f"{ping.key}:{ping.n}")


FLAKY_PARTITION = "__strm:sparkt.flaky.1"
_attempts_seen: set[tuple[int, int, int]] = set()


def _flaky_key(ping: Ping) -> str:
    """flaky's partition key, and, once per task attempt, a real failure of partition 1:
    the first attempt of Spark partition 0 puts a string where partition 1's stream goes
    (so its appends there fail after those to other partitions went in), later attempts
    take it away. Redis is the URL the test put in the local property ``runnel.test.redis``.
    """
    from pyspark import TaskContext

    context = TaskContext.get()
    url = context.getLocalProperty("runnel.test.redis") if context is not None else None
    if context is None or url is None or context.partitionId() != 0:
        return ping.key
    attempt = (context.stageId(), context.partitionId(), context.attemptNumber())
    if attempt not in _attempts_seen:
        _attempts_seen.add(attempt)
        client = redis.Redis.from_url(url)
        if context.attemptNumber() == 0:
            client.set(FLAKY_PARTITION, "not a stream")
        elif client.type(FLAKY_PARTITION) == b"string":
            client.delete(FLAKY_PARTITION)
        client.close()
    return ping.key


flaky = app.stream("flaky", record=Ping, partition_by=_flaky_key, partition_count=PARTITIONS)
keyed = app.stream(
    "keyed", record=Ping, partition_by="key", partition_count=PARTITIONS, idempotency_key="n"
)
