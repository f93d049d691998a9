"""``python -m benchmarks.cluster [--events N]``: one worker in this process sending and
draining a stream on a private 3-master Redis Cluster, next to the same on one private
redis-server. A first look at what the per-partition scripts of the cluster transport
cost (docs/cluster.md); not part of the suite's targets.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import server
from runnel import App, Record
from runnel.processing.worker import Worker

PARTITIONS = 16
BATCH = 100


class Event(Record):
    key: str
    n: int


async def measure(url: str, events: int, **settings: Any) -> dict[str, float]:
    """Events per second sent (batches of BATCH) and drained by one in-process worker."""
    app = App(name=f"bench{time.monotonic_ns()}", redis_url=url, default_join_delay=0, **settings)
    stream = app.stream("events", record=Event, partition_by="key", partition_count=PARTITIONS)
    done = asyncio.Event()
    count = 0

    @app.processor(stream)
    async def drain(records):
        nonlocal count
        async for batch in records.take(BATCH, within=0.01):
            count += len(batch)
            if count >= events:
                done.set()

    started = time.perf_counter()
    for first in range(0, events, BATCH):
        await stream.send(*[Event(key=f"k{n % 97}", n=n) for n in range(first, first + BATCH)])
    sent = time.perf_counter() - started
    worker = Worker(app)
    started = time.perf_counter()
    task = asyncio.create_task(worker.run())
    await done.wait()
    drained = time.perf_counter() - started
    worker.stop()
    await task
    await app.aclose()
    return {"send": events / sent, "drain": events / drained}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster", description=__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    from tests.rediscluster.cluster import start_cluster  # the test fixture's cluster

    with contextlib.ExitStack() as stack:
        single = stack.enter_context(server())
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        cluster = stack.enter_context(start_cluster(directory, masters=3))
        rows = {
            "redis://": asyncio.run(measure(single, args.events)),
            "redis+cluster:// (3 masters)": asyncio.run(measure(cluster.url, args.events)),
        }
    print(f"{args.events} events, {PARTITIONS} partitions, batches of {BATCH}")
    print(f"{'store':<30} {'send/s':>10} {'drain/s':>10}")
    for name, row in rows.items():
        print(f"{name:<30} {row['send']:>10.0f} {row['drain']:>10.0f}")


if __name__ == "__main__":
    main()
