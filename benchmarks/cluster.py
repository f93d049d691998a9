"""``python -m benchmarks.cluster [--events N] [--backlog N]`` (or ``python -m benchmarks
cluster [--events N]``): one private redis-server next to a private 3-master Redis
Cluster on the same machine, in one run.

1. Per event: one worker in this process sends and drains a stream (16 partitions,
   batches of 100) on each store; the difference of the microseconds per event is what
   cluster mode costs over single-node mode.
2. Drain rate with 2 real ``runnel worker`` processes (benchmarks/processes_app.py) on a
   backlog: from the first entry read to the last one acknowledged, with the share of a
   core each worker process and each redis-server used meanwhile. The machine has 2
   cores shared by the workers and every redis-server: a cluster cannot scale here, it
   only spreads the servers' part; the figures say where the cores went.
3. Waiting: one in-process worker with nothing to do, then sent one event at a time:
   the commands per second the servers serve while it idles, and the time from a send
   to its processing (median, 99th percentile). On the cluster both ways a fetcher can
   wait: a blocking read per partition (the default) and looking every 20 ms (what it
   does over more than ``MAX_BLOCKING`` partitions).

docs/cluster.md quotes the figures. Not part of the suite's targets.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from redis.cluster import RedisCluster

from benchmarks import processes_app
from benchmarks.common import APP, ROOT, Ping, server
from benchmarks.common import PARTITIONS as BENCH_PARTITIONS
from benchmarks.harness import RedisCpu
from benchmarks.jobs import cpu_seconds
from runnel import App, Record
from runnel.runtime.worker import Worker
from runnel_redis import cluster as cluster_transport

PARTITIONS = 16
BATCH = 100
SAMPLES = 200


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


async def fill(url: str, total: int) -> None:
    """``total`` events on the processes app's stream, sent through Runnel (either store)."""
    app = App(name=APP, redis_url=url)
    stream = app.stream(
        processes_app.STREAM,
        record=Ping,
        partition_by="key",
        partition_count=BENCH_PARTITIONS,
    )
    for first in range(0, total, 500):
        last = min(total, first + 500)
        await stream.send(*[Ping(key=f"k{n}", n=n) for n in range(first, last)])
    await app.aclose()


def progress(client: Any, keys: list[str], group: str) -> tuple[int, int]:
    """Entries the group has read, and of those not yet acknowledged, over ``keys``."""
    read = pending = 0
    for key in keys:
        with contextlib.suppress(redis.ResponseError):  # the group not made yet
            for info in client.xinfo_groups(key):
                if info["name"] == group.encode():
                    read += int(info.get("entries-read") or 0)
                    pending += int(info["pending"])
    return read, pending


def two_workers(url: str, plain: str, servers: list[str], total: int) -> dict[str, Any]:
    """Drain ``total`` events with 2 ``runnel worker`` processes; the rate from the first
    entry read to the last acknowledged, and every process's share of a core then."""
    from runnel_redis.layout import layout_for

    asyncio.run(fill(url, total))
    layout = layout_for(url)
    keys = [layout.partition(APP, processes_app.STREAM, n) for n in range(BENCH_PARTITIONS)]
    client: Any = RedisCluster.from_url(plain) if "+cluster" in url else redis.Redis.from_url(plain)
    env = dict(os.environ, RUNNEL_REDIS_URL=url, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "runnel", "worker", "benchmarks.processes_app:app"]
    workers = [
        subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        for _ in range(2)
    ]
    try:
        started = None
        deadline = time.monotonic() + 600
        while True:
            read, pending = progress(client, keys, "drain")
            if started is None and read:
                started = time.monotonic()
                cpus = {w.pid: cpu_seconds(w.pid) for w in workers}
                redis_cpus = [RedisCpu(s) for s in servers]
            if read >= total and pending == 0:
                break
            if time.monotonic() > deadline or any(w.poll() is not None for w in workers):
                raise RuntimeError(f"{url}: not drained ({read} read, {pending} pending)")
            time.sleep(0.02)
        elapsed = time.monotonic() - started  # type: ignore[operator]
        shares = [(cpu_seconds(pid) - used) / elapsed for pid, used in cpus.items()]
        servers_share = [cpu.share() for cpu in redis_cpus]
    finally:
        for w in workers:
            w.terminate()
        for w in workers:
            w.wait(30)
        client.close()
    return {"rate": total / elapsed, "cpu": shares, "redis_cpu": servers_share}


def commands_served(servers: list[str]) -> int:
    total = 0
    for url in servers:
        with redis.Redis.from_url(url) as client:
            total += int(client.info("stats")["total_commands_processed"])
    return total


async def waiting(
    url: str, servers: list[str], samples: int, idle: float = 2.0
) -> dict[str, float]:
    """Commands/s the servers serve while a worker idles; send-to-processed latency."""
    app = App(name=f"wait{time.monotonic_ns()}", redis_url=url, default_join_delay=0)
    stream = app.stream("events", record=Event, partition_by="key", partition_count=PARTITIONS)
    arrived: asyncio.Queue[float] = asyncio.Queue()

    @app.processor(stream)
    async def note(records):
        async for _ in records:
            arrived.put_nowait(time.perf_counter())

    worker = Worker(app)
    task = asyncio.create_task(worker.run())
    await stream.send(Event(key="warm", n=0))
    await arrived.get()
    await asyncio.sleep(0.5)  # settled: partitions owned, fetchers waiting
    before = commands_served(servers)
    await asyncio.sleep(idle)
    idle_rate = (commands_served(servers) - before) / idle
    took = []
    for n in range(samples):
        started = time.perf_counter()
        await stream.send(Event(key=f"k{n}", n=n))
        took.append((await arrived.get()) - started)
        await asyncio.sleep(0.005)  # let the fetcher go back to waiting
    worker.stop()
    await task
    await app.aclose()
    took.sort()
    return {
        "idle": idle_rate,
        "p50": took[len(took) // 2] * 1000,
        "p99": took[int(len(took) * 0.99)] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster", description=__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--backlog", type=int, default=50_000)
    args = parser.parse_args()
    run(args.events, args.backlog)


def run(events: int = 20_000, backlog: int = 50_000) -> None:
    """Both parts on a fresh redis-server and a fresh 3-master cluster; prints the figures."""
    from tests.support.redis_cluster import start_cluster  # the test fixture's cluster

    with contextlib.ExitStack() as stack:
        single = stack.enter_context(server())
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        cluster = stack.enter_context(start_cluster(directory, masters=3))
        masters = [f"redis://127.0.0.1:{node.port}" for node in cluster.masters()]
        rows = {
            "redis://": asyncio.run(measure(single, events)),
            "redis+cluster:// (3 masters)": asyncio.run(measure(cluster.url, events)),
        }
        print(
            f"one worker in this process: {events} events, {PARTITIONS} partitions, "
            f"batches of {BATCH}"
        )
        print(f"{'store':<30} {'send/s':>10} {'drain/s':>10} {'us/event drained':>17}")
        for name, row in rows.items():
            print(
                f"{name:<30} {row['send']:>10.0f} {row['drain']:>10.0f} {1e6 / row['drain']:>17.1f}"
            )
        single_row, cluster_row = rows.values()
        print(
            "cluster mode costs "
            f"{1e6 / cluster_row['drain'] - 1e6 / single_row['drain']:.1f} us more per event "
            f"drained, {1e6 / cluster_row['send'] - 1e6 / single_row['send']:.1f} us more "
            "per event sent"
        )
        print(
            f"2 `runnel worker` processes, a backlog of {backlog} events "
            f"({BENCH_PARTITIONS} partitions), {os.cpu_count()} cores:"
        )
        stores = {
            "redis:// (1 redis-server)": (single, single, [single]),
            "redis+cluster:// (3 masters)": (cluster.url, cluster.redis_url, masters),
        }
        for name, (url, plain, servers) in stores.items():
            got = two_workers(url, plain, servers, backlog)
            workers = " + ".join(f"{share:.0%}" for share in got["cpu"])
            redis_cpu = " + ".join(f"{share:.0%}" for share in got["redis_cpu"])
            print(
                f"  {name:<30} {got['rate']:>8.0f} events/s; CPU (of one core each): "
                f"workers {workers}, redis-server {redis_cpu}",
                flush=True,
            )
        print(
            f"one idle worker ({PARTITIONS} partitions), then {SAMPLES} events sent one at a time:"
        )
        cases = [
            ("redis:// (1 redis-server)", single, [single], None),
            ("redis+cluster://, blocking reads", cluster.url, masters, None),
            ("redis+cluster://, looking every 20 ms", cluster.url, masters, 0),
        ]
        for name, url, servers, cap in cases:
            saved = cluster_transport.MAX_BLOCKING
            if cap is not None:
                cluster_transport.MAX_BLOCKING = cap
            try:
                got = asyncio.run(waiting(url, servers, SAMPLES))
            finally:
                cluster_transport.MAX_BLOCKING = saved
            print(
                f"  {name:<38} idle: {got['idle']:>6.0f} commands/s; send to processed: "
                f"median {got['p50']:.2f} ms, p99 {got['p99']:.2f} ms",
                flush=True,
            )
    print(
        "load average {:.2f} {:.2f} {:.2f} (1, 5, 15 min): other work on the machine takes "
        "CPU from both stores alike".format(*os.getloadavg())
    )


if __name__ == "__main__":
    main()
