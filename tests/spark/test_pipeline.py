"""The pipeline Runnel exists for, end to end, with real processes: Spark writes 100,000
events into a stream while the processes of chosen tasks die (``SIGKILL``, as a lost
executor) after part of their rows are in, so Spark runs those tasks again (speculation
is on too, though local Spark starts no speculative copy); a Python producer sends
5,000 more through a TCP proxy that drops replies; three worker processes count per key
into a table and send one record per event to an output stream, while workers are
killed with ``kill -9`` twice; then Spark reads the table and the output stream. Every
count is exact and every input's output is there once.

The same pipeline with identities turned off (the sink's and the producer's) counts some
events twice: the faults really hit rows in flight, so the test can fail.

Spark runs in processes of its own (``local[2,4]``: two cores, a task tried up to four
times), so its settings do not touch the session the other Spark tests share.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
import redis

from tests.support.processes import WorkerProcess, cli, env_with, wait_for
from tests.support.proxy import Proxy

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

KEYS = 97
PARTITIONS = 8
SPARK_PARTITIONS = 8
FAILING = (1, 4, 6)  # Spark partitions whose first attempt dies with some rows in
LOCK_EXPIRY = 3.0
SINK_WITHOUT_IDENTITIES = {"exactlyOnce": "false"}  # the sink option that turns them off

APP = """
import asyncio
import os
import signal
import threading
import time

import redis
from pydantic import model_validator

from runnel import App, Record

app = App(name={name!r})
_validated = {{}}


def crash_midway():
    # In the Spark sink's process, on the first attempt of a chosen task: once the task
    # has checked all its rows and its first chunks are going in, its process dies as an
    # executor that is lost does (nothing is flushed, nothing told).
    failing = os.environ.get("PIPELINE_FAILING")
    if not failing:
        return
    from pyspark import TaskContext

    task = TaskContext.get()
    if task is None or task.attemptNumber() != 0:
        return
    if str(task.partitionId()) not in failing.split(","):
        return
    ident = (task.stageId(), task.partitionId())
    _validated[ident] = _validated.get(ident, 0) + 1
    if _validated[ident] == int(os.environ["PIPELINE_PER_TASK"]):
        threading.Thread(target=_kill_when_rows_go_in, daemon=True).start()


def _kill_when_rows_go_in():
    client = redis.Redis.from_url(os.environ["RUNNEL_REDIS_URL"])
    keys = [f"__strm:{name}.events.{{n}}" for n in range({partitions})]
    first = sum(client.xlen(k) for k in keys)
    while sum(client.xlen(k) for k in keys) < first + 500:
        time.sleep(0.001)
    os.kill(os.getpid(), signal.SIGKILL)


class Event(Record):
    key: str
    n: int

    @model_validator(mode="after")
    def _in_spark(self):
        crash_midway()
        return self


events_in = app.stream("events", record=Event, partition_by="key", partition_count={partitions})
outputs = app.stream("outputs", record=Event, partition_by="key", partition_count=4)
counts = app.table("counts", source=events_in, default=0)


@app.processor(events_in)
async def count(events):
    async for event in events.records():
        counts[event.key] += 1
        await events.send(outputs, Event(key=event.key, n=event.n))
        time.sleep(0.0002)  # slow enough that kill -9 finds events in flight
        await asyncio.sleep(0)
"""

SPARK = """
import json
import os
import sys

from pyspark.sql import SparkSession

import runnel_spark

mode, url = sys.argv[1], sys.argv[2]
spark = (
    SparkSession.builder.master("local[2,4]")
    .appName("runnel-pipeline")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.speculation", "true")
    .config("spark.speculation.interval", "100ms")
    .config("spark.speculation.quantile", "0.5")
    .config("spark.speculation.multiplier", "1.5")
    .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
runnel_spark.register(spark)

if mode == "write":
    rows, options = int(sys.argv[3]), json.loads(sys.argv[4])
    df = spark.createDataFrame(
        spark.sparkContext.parallelize(range(rows), {spark_partitions})
        .map(lambda n: (f"k{{n % {keys}}}", n)),
        "key string, n long",
    )
    (
        df.write.format("runnel").mode("append")
        .option("stream", "pipeapp:events_in").option("url", url)
        .option("chunkSize", "250").options(**options).save()
    )
else:
    counts = spark.read.format("runnel").option("table", "pipeapp:counts").option("url", url)
    out = spark.read.format("runnel").option("stream", "pipeapp:outputs").option("url", url)
    print(json.dumps({{
        "counts": {{r["key"]: r["value"] for r in counts.load().collect()}},
        "outputs": [[r["key"], r["n"]] for r in out.load().select("key", "n").collect()],
    }}))
spark.stop()
"""

PRODUCER = """
import asyncio
import sys
from pathlib import Path

from pipeapp import Event, app, events_in

first, count = int(sys.argv[1]), int(sys.argv[2])


async def main():
    for start in range(first, first + count, 100):
        if start == first + 100:  # warmed up (scripts loaded): the test arms its proxy now
            Path("warm").touch()
            while not Path("go").exists():
                await asyncio.sleep(0.01)
        batch = [Event(key=f"k{{n % {keys}}}", n=n) for n in range(start, start + 100)]
        while True:
            try:
                await events_in.send(*batch)
                break
            except Exception as exc:  # what a producer without identities does: again
                print("sending again after", type(exc).__name__, flush=True)
        await asyncio.sleep(0.01)
    await app.aclose()


asyncio.run(main())
"""


def _settled(client: redis.Redis, app_name: str) -> bool:
    for stream, partitions in (("events", PARTITIONS),):
        for n in range(partitions):
            key = f"__strm:{app_name}.{stream}.{n}"
            if not client.exists(key):
                return False
            groups = client.xinfo_groups(key)
            if not groups or groups[0]["lag"] != 0 or groups[0]["pending"] != 0:
                return False
    return True


def _acknowledged(client: redis.Redis, app_name: str) -> int:
    total = 0
    for n in range(PARTITIONS):
        key = f"__strm:{app_name}.events.{n}"
        if client.exists(key):
            for group in client.xinfo_groups(key):
                total += int(group["entries-read"] or 0) - int(group["pending"])
    return total


def _pipeline(
    tmp_path: Path, redis_url: str, app_name: str, rows: int, sent: int, identities: bool
) -> tuple[dict[str, int], list[tuple[str, int]], Counter[str], int]:
    """Run it; what the table and the output stream hold, as Spark reads them, the
    counts per key that went in, and the duplicates the stream dropped."""
    (tmp_path / "pipeapp.py").write_text(
        textwrap.dedent(APP.format(name=app_name, partitions=PARTITIONS))
    )
    (tmp_path / "spark_job.py").write_text(
        SPARK.format(spark_partitions=SPARK_PARTITIONS, keys=KEYS)
    )
    (tmp_path / "producer.py").write_text(PRODUCER.format(keys=KEYS))
    host, port = redis_url.removeprefix("redis://").split("/")[0].split(":")
    proxy = Proxy(host, int(port))
    settings = {
        "RUNNEL_DEFAULT_LOCK_EXPIRY": str(LOCK_EXPIRY),
        "RUNNEL_DEFAULT_GRACE_PERIOD": "1",
        "PYTHONPATH": str(tmp_path),
        "PYSPARK_PYTHON": sys.executable,
    }
    if not identities:
        settings["RUNNEL_IDEMPOTENT_SENDS"] = "false"
    env = env_with(redis_url, **settings)
    producer_env = env_with(proxy.url, **settings)
    spark_env = env_with(
        redis_url,
        **settings,
        PIPELINE_FAILING=",".join(map(str, FAILING)),
        PIPELINE_PER_TASK=str(rows // SPARK_PARTITIONS),
    )
    client = redis.Redis.from_url(redis_url)
    workers: list[WorkerProcess] = []
    sink_options = {} if identities else SINK_WITHOUT_IDENTITIES

    def start() -> WorkerProcess:
        workers.append(WorkerProcess("pipeapp:app", tmp_path, env))
        return workers[-1]

    try:
        victim = start()
        start()
        start()
        writing = subprocess.Popen(
            [sys.executable, "spark_job.py", "write", redis_url, str(rows),
             json.dumps(sink_options)],
            cwd=tmp_path, env=spark_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        producing = subprocess.Popen(
            [sys.executable, "producer.py", str(rows), str(sent)],
            cwd=tmp_path, env=producer_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        pattern = f"__strm:{app_name}.events.".encode()
        wait_for(lambda: (tmp_path / "warm").exists(), timeout=120)
        for _ in range(3):  # three replies to its appends the producer never gets
            proxy.arm(pattern)
            (tmp_path / "go").touch()
            wait_for(lambda: proxy.dropped.is_set() or producing.poll() is not None, timeout=120)
        wait_for(lambda: _acknowledged(client, app_name) > rows // 10, timeout=300)
        victim.kill()  # SIGKILL: whatever it held in flight is delivered again
        victim = start()
        wait_for(lambda: _acknowledged(client, app_name) > rows // 3, timeout=300)
        victim.kill()
        start()
        written, _ = writing.communicate(timeout=600)
        assert writing.returncode == 0, written[-3000:]
        produced, _ = producing.communicate(timeout=300)
        assert producing.returncode == 0, produced[-3000:]
        wait_for(lambda: _settled(client, app_name), timeout=600)
        time.sleep(1)  # the outputs of the last commits are in with them; nothing to wait for
        read = subprocess.run(
            [sys.executable, "spark_job.py", "read", redis_url],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert read.returncode == 0, read.stderr[-3000:]
        status = cli("status", "pipeapp:app", "--json", cwd=tmp_path, env=env)
        assert status.returncode == 0, status.stderr
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.stop()
        proxy.close()
        client.close()
    found = json.loads(read.stdout.strip().splitlines()[-1])
    went_in = Counter(f"k{n % KEYS}" for n in range(rows + sent))
    [count] = [p for p in json.loads(status.stdout)["processors"] if p["name"] == "count"]
    outputs = [(k, n) for k, n in found["outputs"]]
    return found["counts"], outputs, went_in, count["duplicates_dropped"]


@pytest.mark.timeout(1500)
def test_spark_to_tables_to_spark_counts_every_event_once(
    tmp_path: Path, redis_url: str, app_name: str
) -> None:
    rows, sent = 100_000, 5_000
    counts, outputs, went_in, dropped = _pipeline(tmp_path, redis_url, app_name, rows, sent, True)
    assert counts == dict(went_in)
    assert Counter(outputs) == Counter((f"k{n % KEYS}", n) for n in range(rows + sent))
    assert dropped > 0  # retried tasks and lost replies really sent rows again


@pytest.mark.timeout(1500)
def test_the_same_pipeline_without_identities_counts_some_events_twice(
    tmp_path: Path, redis_url: str, app_name: str
) -> None:
    rows, sent = 40_000, 2_000
    counts, outputs, went_in, dropped = _pipeline(tmp_path, redis_url, app_name, rows, sent, False)
    assert set(counts) == set(went_in)
    assert all(counts[k] >= went_in[k] for k in went_in)  # nothing lost...
    assert sum(counts.values()) > rows + sent  # ...and some events in twice
    assert len(outputs) == sum(counts.values())  # each copy processed once
    twice = [n for (_, n), times in Counter(outputs).items() if times > 1]
    assert any(n < rows for n in twice)  # rows of Spark's retried tasks
    assert any(n >= rows for n in twice)  # records of the producer's lost replies
    assert dropped == 0
