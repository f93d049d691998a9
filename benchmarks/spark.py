"""``python -m benchmarks.spark [ROWS]``: reading and writing a stream through Spark, next to
a plain redis-py loop doing the same XRANGE/XADD work.

Both sides use one private redis-server started here and the same rows, one after the
other. Spark runs ``local[*]``; its first jobs (which start Python workers) are run
before timing, and the fixed cost of a job (planning runs in fresh Python processes) is
printed on its own: it is in the rates, so small ROWS understate Spark's throughput.
Spark's side includes what the plain loop skips: pydantic validation, hashing each key to
its partition, and conversion to Arrow; its write is the exactly-once one (each row
carries its number in its task, checked by the append script), and is also timed with
``exactlyOnce=false`` (no identities, at least once) into a stream of its own.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import redis

from runnel import App, Record

PARTITIONS = 16
CHUNK = 1000
ROOT = Path(__file__).resolve().parents[1]

# Spark's Python workers import this module to find the stream: keep these at the top level.
app = App(name="sparkbench")


class Ping(Record):
    key: str
    n: int


pings = app.stream(
    "pings", record=Ping, partition_by="key", partition_count=PARTITIONS, partition_size=10**7
)
copies = app.stream(
    "copies", record=Ping, partition_by="key", partition_count=PARTITIONS, partition_size=10**7
)
plain = app.stream(
    "plain", record=Ping, partition_by="key", partition_count=PARTITIONS, partition_size=10**7
)


def plain_write(client: redis.Redis, total: int) -> float:
    keys = [f"__strm:plain.pings.{i}" for i in range(PARTITIONS)]
    start = time.perf_counter()
    for base in range(0, total, CHUNK):
        with client.pipeline(transaction=True) as pipe:
            for i in range(base, min(base + CHUNK, total)):
                data = orjson.dumps({"key": f"k{i}", "n": i})
                pipe.xadd(keys[i % PARTITIONS], {"data": data}, maxlen=10**7, approximate=True)
            pipe.execute()
    return total / (time.perf_counter() - start)


def plain_read(client: redis.Redis, total: int) -> float:
    start = time.perf_counter()
    seen = 0
    for i in range(PARTITIONS):
        lo = "-"
        while True:
            entries = client.xrange(f"__strm:plain.pings.{i}", min=lo, max="+", count=CHUNK)
            for _, fields in entries:
                orjson.loads(fields[b"data"])
            seen += len(entries)
            if len(entries) < CHUNK:
                break
            lo = "(" + entries[-1][0].decode()
    assert seen == total, (seen, total)
    return total / (time.perf_counter() - start)


def spark_write(
    spark: Any, url: str, total: int, stream: str = "pings", exactly_once: bool = True
) -> float:
    df = spark.range(total).selectExpr("concat('k', id) as key", "id as n")
    start = time.perf_counter()
    (
        df.write.format("runnel")
        .mode("append")
        .option("stream", f"benchmarks.spark:{stream}")
        .option("url", url)
        .option("exactlyOnce", str(exactly_once).lower())
        .save()
    )
    return total / (time.perf_counter() - start)


def spark_read(spark: Any, url: str, total: int) -> float:
    df = spark.read.format("runnel").option("stream", "benchmarks.spark:pings")
    start = time.perf_counter()
    # The noop sink makes Spark read and convert every column, and keep nothing.
    df.option("url", url).load().write.format("noop").mode("overwrite").save()
    return total / (time.perf_counter() - start)


def row(name: str, ours: float, plain: float) -> None:
    print(
        f"{name:<22} spark {ours:>9,.0f} rows/s   plain redis-py {plain:>9,.0f} rows/s"
        f"   ratio {ours / plain:.2f}"
    )


def main(total: int) -> None:
    from runnel_redis.embedded import start_server

    server = start_server(Path(tempfile.mkdtemp(prefix="runnel-bench-")), persist=False)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
    )
    try:
        from pyspark.sql import SparkSession

        import runnel_spark

        started = time.perf_counter()
        spark = (
            SparkSession.builder.master("local[*]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        runnel_spark.register(spark)
        cores = spark.sparkContext.defaultParallelism
        print(
            f"{total:,} rows over {PARTITIONS} partitions, redis-server at {server.url}, "
            f"Spark local[*] with {cores} cores (started in {time.perf_counter() - started:.1f}s)\n"
        )
        spark_write(spark, server.url, 2000, stream="copies")  # warm up: start the workers
        spark.read.format("runnel").option("stream", "benchmarks.spark:copies").option(
            "url", server.url
        ).load().write.format("noop").mode("overwrite").save()

        # What every job costs whatever its size: planning starts Python processes.
        fixed_write = 1 / spark_write(spark, server.url, 1, stream="copies")
        started = time.perf_counter()
        spark.read.format("runnel").option("stream", "benchmarks.spark:copies").option(
            "url", server.url
        ).option("start", "+").load().write.format("noop").mode("overwrite").save()
        fixed_read = time.perf_counter() - started
        print(f"fixed cost of a job: write {fixed_write:.2f}s, read {fixed_read:.2f}s\n")

        client = redis.Redis.from_url(server.url)
        once = spark_write(spark, server.url, total)
        loop = plain_write(client, total)
        at_least = spark_write(spark, server.url, total, stream="plain", exactly_once=False)
        row("write (exactly once)", once, loop)
        row("write (at least once)", at_least, loop)
        row("read", spark_read(spark, server.url, total), plain_read(client, total))
        spark.stop()
    finally:
        os.kill(server.pid, signal.SIGTERM)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
