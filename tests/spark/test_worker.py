"""Events written by Spark are routed as Python producers route them, and a real
``runnel worker`` consumes them in order."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any

import redis

from tests.support.processes import WorkerProcess, env_with, wait_for
from tests.support.spark import ROOT, send, stored, write

EVENTS, KEYS = 600, 12


def test_a_worker_consumes_what_spark_wrote_in_order(
    spark: Any, streams: ModuleType, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    # Each key's events in one Spark partition, in order: what keeps a key's order.
    rows = [(f"k{i % KEYS}", i) for i in range(EVENTS)]
    df = spark.createDataFrame(rows, "key string, n long").repartition(3, "key")
    write(df.sortWithinPartitions("n"), streams.pings_out, redis_url)

    # The same keys sent by a Python producer land in the same partitions.
    send(streams.pings, [streams.Ping(key=f"k{i}", n=i) for i in range(KEYS)])
    python_side = {p.key: n for n, _, p in stored(redis_client, streams.pings)}
    spark_side = {p.key: n for n, _, p in stored(redis_client, streams.pings_out)}
    assert spark_side == python_side
    assert len(set(spark_side.values())) > 1  # the keys are spread, not all in one

    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = env_with(redis_url, PYTHONPATH=pythonpath)
    target = "tests.spark.streams:app"
    with WorkerProcess(target, tmp_path, env, "--processors", "record_pings") as worker:
        wait_for(lambda: redis_client.llen("seen") >= EVENTS, timeout=120)
        assert worker.stop() == 0, worker.output

    seen: dict[str, list[int]] = {}
    for item in redis_client.lrange("seen", 0, -1):
        key, _, n = item.decode().partition(":")
        seen.setdefault(key, []).append(int(n))
    assert seen == {f"k{k}": [i for i in range(EVENTS) if i % KEYS == k] for k in range(KEYS)}
