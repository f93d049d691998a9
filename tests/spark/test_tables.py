"""Tables read as DataFrames, on the session's redis-server and on a 3-master Redis
Cluster: filled by their processors running in-process (``runnel.testing.run``), then
read by a local Spark session through the ``runnel`` data source."""

from __future__ import annotations

import asyncio
import datetime
import importlib
from collections import Counter
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
import redis

from runnel import App, Record
from runnel.exceptions import Misconfigured
from runnel.testing import run
from runnel_spark import table_schema
from tests.support.spark import APP

TABLES = "tests.spark.tables"
TABLES_APP = f"{TABLES}:app"


@pytest.fixture(params=["redis", "cluster"])
def store_url(request: pytest.FixtureRequest) -> str:
    if request.param == "redis":
        return str(request.getfixturevalue("redis_url"))
    return str(request.getfixturevalue("redis_cluster_url"))


@pytest.fixture
def tables(redis_url: str) -> Iterator[ModuleType]:
    module = importlib.import_module(TABLES)
    saved = module.app.settings.redis_url
    module.app.settings.redis_url = redis_url
    yield module
    module.app.settings.redis_url = saved


def fill(app: App, url: str, *sends: tuple[Any, list[Record]]) -> None:
    """Send to each stream, and run the app's processors until all of it is handled."""

    async def main() -> None:
        try:
            async with run(app, store=url) as t:
                for stream, records in sends:
                    await stream.send(*records)
                await t.processed()
        finally:
            await app.aclose()

    asyncio.run(main())


def table_reader(spark: Any, table: str, url: str, **options: str) -> Any:
    return spark.read.format("runnel").option("table", table).option("url", url).options(**options)


def sales(tables: ModuleType) -> list[Record]:
    """Six shops, a sale every 7 seconds of event time, in time order (none late)."""
    return [tables.Sale(shop=f"s{i % 6}", at=i * 7, amount=i + 1) for i in range(90)]


def test_a_count_table_and_a_record_table(
    spark: Any, tables: ModuleType, store_url: str, redis_url: str, redis_client: redis.Redis
) -> None:
    sent = sales(tables)
    fill(tables.app, store_url, (tables.sales, sent))
    expected = Counter(s.shop for s in sent)

    before = set(redis_client.keys()) if store_url == redis_url else None
    df = table_reader(spark, f"{TABLES}:counts", store_url, chunkSize="2").load()
    assert df.schema.simpleString() == "struct<_partition:int,key:string,value:bigint>"
    rows = df.collect()
    assert sorted((r.key, r.value) for r in rows) == sorted(expected.items())
    assert all(r._partition == tables.counts.partition_of(r.key) for r in rows)
    assert df.rdd.getNumPartitions() == tables.PARTITIONS
    if before is not None:  # reading created nothing
        assert set(redis_client.keys()) == before

    # By name with app=, and a table declared with record=: one column per field.
    df = table_reader(spark, "totals", store_url, app=TABLES_APP).load()
    assert df.schema.simpleString() == (
        "struct<_partition:int,key:string,count:bigint,amount:bigint>"
    )
    got = {r.key: (r["count"], r.amount) for r in df.collect()}
    assert got == {
        shop: (n, sum(s.amount for s in sent if s.shop == shop)) for shop, n in expected.items()
    }


def test_a_windowed_table_by_window_start(
    spark: Any, tables: ModuleType, store_url: str, redis_url: str, redis_client: redis.Redis
) -> None:
    sent = sales(tables)
    fill(tables.app, store_url, (tables.sales, sent))
    if store_url == redis_url:  # the partitions' clocks are stored among the keys: no rows
        hashes = [f"__tabl:sparktab.minutes.{n}" for n in range(tables.PARTITIONS)]
        stored = [h for h in hashes if redis_client.exists(h)]
        assert stored and all(redis_client.hexists(h, b"\x00meta") for h in stored)
    windows: Counter[tuple[str, float]] = Counter()
    for s in sent:
        windows[(s.shop, s.at // 60 * 60)] += s.amount

    # The table named is the one made windowed later: its windowed form is read.
    df = table_reader(spark, f"{TABLES}:minutes", store_url).load()
    assert df.schema.simpleString() == (
        "struct<_partition:int,key:string,window_start:double,window_end:double,value:bigint>"
    )
    rows = df.collect()
    assert sorted((r.key, r.window_start, r.window_end, r.value) for r in rows) == sorted(
        (shop, start, start + 60, amount) for (shop, start), amount in windows.items()
    )
    assert all(r._partition == tables.per_minute.partition_of(r.key) for r in rows)

    def between(since: str, until: str) -> list[tuple[str, float, int]]:
        found = table_reader(spark, f"{TABLES}:per_minute", store_url, since=since, until=until)
        return sorted((r.key, r.window_start, r.value) for r in found.load().collect())

    inside = sorted(
        (shop, start, amount) for (shop, start), amount in windows.items() if 120 <= start < 300
    )
    assert inside and len(inside) < len(windows)
    assert between("120", "300") == inside
    assert between("1970-01-01T00:02:00", "1970-01-01T00:05:00+00:00") == inside
    assert between("100.5", "300") == inside


def test_typed_keys_and_values_and_json_ones(
    spark: Any, tables: ModuleType, redis_url: str
) -> None:
    readings = [tables.Reading(sensor=i % 5, value=(i * 37) % 11 + 0.5) for i in range(40)]
    visits = [tables.Visit(user=f"u{i % 3}", day=i) for i in range(9)]
    fill(tables.app, redis_url, (tables.readings, readings), (tables.visits, visits))

    # partition_by names an int field: the key is a bigint; a float default: a double.
    df = table_reader(spark, f"{TABLES}:peaks", redis_url).load()
    assert df.schema.simpleString() == "struct<_partition:int,key:bigint,value:double>"
    peaks = {r.key: r.value for r in df.collect()}
    assert peaks == {n: max(r.value for r in readings if r.sensor == n) for n in range(5)}

    # partition_by is a function, the default a list: the key's and the value's JSON.
    df = table_reader(spark, f"{TABLES}:days", redis_url).load()
    assert df.schema.simpleString() == "struct<_partition:int,key:string,value:string>"
    got = {r.key: r.value for r in df.collect()}
    assert got == {
        f'"u{u}"': "[" + ",".join(str(d) for d in range(u, 9, 3)) + "]" for u in range(3)
    }


def test_the_schema_follows_the_default_and_the_record() -> None:
    class Order(Record):
        customer: str
        at: datetime.datetime

    app = App(name="schemas")
    orders = app.stream("orders", record=Order, partition_by="at", partition_count=2)
    cases = {
        "flags": (False, "boolean"),
        "names": ("", "string"),
        "ratios": (0.0, "double"),
        "counts": (0, "bigint"),
        "maps": ({}, "string"),
        "nothing": (None, "string"),
    }
    for name, (default, kind) in cases.items():
        schema = table_schema(app.table(name, source=orders, default=default))
        assert schema.simpleString() == f"struct<_partition:int,key:timestamp,value:{kind}>"
    last = app.table("last", source=orders, record=Order).session(30)
    assert table_schema(last).simpleString() == (
        "struct<_partition:int,key:timestamp,window_start:double,window_end:double,"
        "customer:string,at:timestamp>"
    )

    class Clash(Record):
        key: str

    clash = app.table("clash", source=orders, record=Clash)
    with pytest.raises(Misconfigured, match="record field 'key' has the name of a column"):
        table_schema(clash)


def test_a_value_that_does_not_fit_names_the_table_partition_and_key(
    spark: Any, tables: ModuleType, redis_url: str, redis_client: redis.Redis
) -> None:
    bad = tables.Sale(shop="oops", at=1, amount=-1)
    fill(tables.app, redis_url, (tables.sales, [*sales(tables)[:6], bad]))
    number = tables.counts.partition_of("oops")
    with pytest.raises(Exception) as failure:
        table_reader(spark, f"{TABLES}:counts", redis_url).load().collect()
    assert (
        f'cannot read key "oops" of table sparktab.counts partition {number}: its value '
        '"refund" does not fit its column (bigint)'
    ) in str(failure.value)

    # A key that is not of the partition_by field's type (stored by hand here).
    redis_client.hset("__tabl:sparktab.peaks.1", b'"one"', b"1.5")
    with pytest.raises(Exception) as failure:
        table_reader(spark, f"{TABLES}:peaks", redis_url).load().collect()
    assert (
        'cannot read key "one" of table sparktab.peaks partition 1: the key does not fit '
        "column key (bigint, as field sensor of Reading): Input should be a valid integer"
    ) in str(failure.value)


def test_a_table_built_with_another_partition_count_is_refused(
    spark: Any, tables: ModuleType, redis_url: str, redis_client: redis.Redis
) -> None:
    fill(tables.app, redis_url, (tables.sales, sales(tables)[:6]))
    redis_client.hset("__tbls:sparktab", "counts", 8)  # as if built with 8 partitions
    with pytest.raises(Exception) as failure:
        table_reader(spark, f"{TABLES}:counts", redis_url).load().collect()
    assert (
        "table 'counts' was built with 8 partitions, but its stream 'sales' is declared with "
        "4: declare partition_count=8 again to read it"
    ) in str(failure.value)


ERRORS = [
    (
        {"table": f"{TABLES}:counts", "stream": "tests.spark.streams:pings"},
        "options table and stream both name what to read: give one of them",
    ),
    ({"table": "counts"}, "table='counts': give MODULE:TABLE (a table object), or app="),
    ({"table": "nope", "app": TABLES_APP}, f"app '{TABLES_APP}' declares no table 'nope'"),
    ({"table": f"{TABLES}:nope"}, f"module '{TABLES}' has no attribute 'nope'"),
    ({"table": f"{TABLES}:sales"}, f"table='{TABLES}:sales' is Stream, not a runnel table"),
    ({"table": f"{TABLES}:counts", "since": "0"}, "table 'counts' is not windowed"),
    ({"table": f"{TABLES}:per_minute", "until": "soon"}, "option until='soon' is neither"),
    ({"table": f"{TABLES}:per_minute", "since": "60", "until": "60"}, "must be before until"),
    ({"table": f"{TABLES}:counts", "start": "-"}, "option start is for streams"),
    ({"table": f"{TABLES}:counts", "splitSize": "9"}, "option splitSize is for streams"),
    ({"table": f"{TABLES}:counts", "chunkSize": "0"}, "option chunksize='0' must be a positive"),
    (
        {"stream": "pings", "app": APP, "since": "0"},
        "option since keeps the windows of a windowed table (option table)",
    ),
]


@pytest.mark.parametrize(("options", "message"), ERRORS)
def test_options_that_do_not_go_together(
    spark: Any, redis_url: str, options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception) as failure:
        spark.read.format("runnel").option("url", redis_url).options(**options).load()
    assert message in str(failure.value)


def test_a_table_is_not_written_nor_read_as_a_stream(
    spark: Any, tables: ModuleType, redis_url: str, tmp_path: Any
) -> None:
    df = spark.createDataFrame([("a", 1)], "key string, value long")
    with pytest.raises(Exception) as failure:
        (
            df.write.format("runnel")
            .mode("append")
            .option("table", f"{TABLES}:counts")
            .option("url", redis_url)
            .save()
        )
    assert "a table is written only by its processor" in str(failure.value)

    stream = table_reader(spark, f"{TABLES}:counts", redis_url)
    with pytest.raises(Exception) as failure:
        (
            spark.readStream.format("runnel")
            .option("table", f"{TABLES}:counts")
            .option("url", redis_url)
            .load()
            .writeStream.format("memory")
            .queryName("table_stream")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
            .awaitTermination()
        )
    assert "a table cannot be read as a stream: read it with spark.read" in str(failure.value)
    assert stream.load().count() == 0  # and a batch read of the empty table works
