"""A local Spark session for the whole run, with Python workers that import ``tests``.

Spark starts its Python workers from the JVM, which inherits this process's environment
when the session is created: ``PYSPARK_PYTHON`` picks this interpreter and ``PYTHONPATH``
lets the workers import ``tests.spark.streams`` (the records and streams under test).
Both are set only while the session starts, so other tests see the environment unchanged.
The master is ``local[2,4]``: two cores, and a failed task is tried up to 4 times, as
Spark does on a cluster (plain ``local[2]`` fails the job at a task's first failure).

``spark`` is a fixture: tests/spark/conftest.py registers it, and a test module elsewhere
imports it by name. Skipped, like every module importing this one, without pyspark and
pyarrow.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from runnel.record import Record
from runnel.stream import Stream
from runnel_redis.embedded import Server

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.spark.streams:app"

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="session")
def spark(redis_server: Server) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    import runnel_spark

    saved = {name: os.environ.get(name) for name in ("PYSPARK_PYTHON", "PYTHONPATH")}
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *paths])
    try:
        session = (
            SparkSession.builder.master("local[2,4]")
            .appName("runnel-spark-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .getOrCreate()
        )
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    session.sparkContext.setLogLevel("ERROR")
    runnel_spark.register(session)
    yield session
    session.stop()


def send(stream: Stream, records: list[Record]) -> list[bytes]:
    """Send as a Python producer does (``stream.send``), in batches of 500."""

    async def main() -> list[bytes]:
        try:
            ids = []
            for start in range(0, len(records), 500):
                ids += await stream.send(*records[start : start + 500])
            return ids
        finally:
            await stream.app.aclose()

    return asyncio.run(main())


def stored(client: redis.Redis, stream: Stream) -> list[tuple[int, str, Record]]:
    """Every entry of ``stream``: (partition, id, decoded record), in partition order."""
    out = []
    for n in range(stream.partition_count):
        for xid, fields in client.xrange(f"__strm:{stream.app.name}.{stream.name}.{n}"):
            out.append((n, xid.decode(), stream.decode(fields)))
    return out


def reader(spark: Any, stream: Stream, url: str, **options: str) -> Any:
    return (
        spark.read.format("runnel")
        .option("app", APP)
        .option("stream", stream.name)
        .option("url", url)
        .options(**options)
        .load()
    )


def write(df: Any, stream: Stream, url: str, **options: str) -> None:
    (
        df.write.format("runnel")
        .mode("append")
        .option("app", APP)
        .option("stream", stream.name)
        .option("url", url)
        .options(**options)
        .save()
    )
