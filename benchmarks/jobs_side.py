"""One side of the job-queue benchmark in a fresh process: Runnel, arq or saq.

``python benchmarks/jobs_side.py {runnel,arq,saq} {enqueue,work,produce,latency} --url URL``

Run by path, not as a module: arq and saq run from virtual environments of their own
(arq needs redis-py < 6), where neither Runnel nor this repository is installed, so this
file imports nothing but the standard library and its side's library. Each action prints
one JSON line (``latency`` prints ``{"ready": true}`` first, once it is consuming).

* ``enqueue``: ``--jobs`` no-op jobs, ``--concurrency`` enqueue calls in flight at once
  (as saq's own benchmark does), timed from the first call to the last reply.
* ``work``: a worker with ``--concurrency`` slots drains the backlog; the job function
  notes when the first and the last job ran (one monotonic clock for every process on the
  machine), and the process stops once it has run ``--jobs``; results are kept (each
  library's default: Runnel's results_enabled, arq's keep_result, saq's job record).
* ``produce`` / ``latency``: one process enqueues ``--rate`` jobs a second, each carrying
  its enqueue time; the worker notes how long each waited before it started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

APP = "jbench"
QUEUE = "jbench"


class Tally:
    def __init__(self, target: int) -> None:
        self.target = target
        self.count = 0
        self.first = 0.0
        self.last = 0.0
        self.cpu_first = 0.0
        self.done = asyncio.Event()
        self.latencies: list[float] = []

    def add(self) -> None:
        self.last = time.monotonic()
        if not self.count:
            self.first = self.last
            self.cpu_first = time.process_time()
        self.count += 1
        if self.count >= self.target:
            self.done.set()

    def result(self) -> dict[str, Any]:
        elapsed = self.last - self.first
        return {
            "jobs": self.count,
            "first": self.first,
            "last": self.last,
            "rate": (self.count - 1) / elapsed if elapsed > 0 else 0.0,
            "cpu": (time.process_time() - self.cpu_first) / (time.monotonic() - self.first),
        }

    def stamp(self, sent: float) -> None:
        self.latencies.append(time.time() - sent)
        self.add()


TALLY = Tally(0)


async def bounded(calls: Any, concurrency: int) -> float:
    """Await every call of ``calls`` (an iterable of zero-argument coroutine functions),
    ``concurrency`` at a time; the seconds it took."""
    queue = list(calls)
    queue.reverse()

    async def lane() -> None:
        while queue:
            await queue.pop()()

    start = time.monotonic()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return time.monotonic() - start


async def paced(rate: int, seconds: float, send: Any) -> int:
    """Call ``send()`` ``rate`` times a second for ``seconds``, each at its planned time."""
    total = int(rate * seconds)
    interval = 1 / rate
    start = time.monotonic()
    tasks = []
    for n in range(total):
        delay = start + n * interval - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(send()))
    await asyncio.gather(*tasks)
    return total


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return {"p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": at(1.0), "jobs": len(ordered)}


# Runnel.


def runnel_app(url: str) -> Any:
    from runnel import App

    app = App(name=APP, redis_url=url, log_level="warning", default_grace_period=1)

    @app.job
    async def noop() -> None:
        TALLY.add()

    @app.job
    async def stamped(sent: float) -> None:
        TALLY.stamp(sent)

    return app


async def runnel_run(a: argparse.Namespace, ready: Any) -> dict[str, Any]:
    from runnel.runtime.worker import Worker

    app = runnel_app(a.url)
    if a.action == "enqueue":
        noop = app.jobs["noop"]
        await noop.delay()  # connected before timing
        seconds = await bounded((noop.delay for _ in range(a.jobs)), a.concurrency)
        await app.aclose()
        return {"jobs": a.jobs, "seconds": seconds, "rate": a.jobs / seconds}
    if a.action == "produce":
        stamped = app.jobs["stamped"]
        await stamped.delay(time.time())
        sent = await paced(a.rate, a.seconds, lambda: stamped.delay(time.time()))
        await app.aclose()
        return {"jobs": sent + 1}
    worker = Worker(app, jobs=True, concurrency=a.concurrency)
    running = asyncio.create_task(worker.run())
    ready()
    await TALLY.done.wait()
    del running
    import runnel  # which tree ran (benchmarks/jobs_baseline.py checks it)

    return {**TALLY.result(), "runnel": runnel.__file__}


# arq.


async def arq_noop(ctx: Any) -> None:
    TALLY.add()


async def arq_stamped(ctx: Any, sent: float) -> None:
    TALLY.stamp(sent)


async def arq_run(a: argparse.Namespace, ready: Any) -> dict[str, Any]:
    from arq import create_pool
    from arq.connections import RedisSettings
    from arq.worker import Worker

    settings = RedisSettings.from_dsn(a.url)
    if a.action in ("enqueue", "produce"):
        pool = await create_pool(settings)
        if a.action == "enqueue":
            await pool.enqueue_job("arq_noop")
            seconds = await bounded(
                (lambda: pool.enqueue_job("arq_noop") for _ in range(a.jobs)), a.concurrency
            )
            await pool.aclose()
            return {"jobs": a.jobs, "seconds": seconds, "rate": a.jobs / seconds}
        await pool.enqueue_job("arq_stamped", time.time())
        sent = await paced(a.rate, a.seconds, lambda: pool.enqueue_job("arq_stamped", time.time()))
        await pool.aclose()
        return {"jobs": sent + 1}
    worker = Worker(
        functions=[arq_noop, arq_stamped],
        redis_settings=settings,
        max_jobs=a.concurrency,
        handle_signals=False,
        log_results=False,
        poll_delay=0.05,  # its fastest here (default 0.5 s: about half as fast)
    )
    running = asyncio.create_task(worker.async_run())
    ready()
    await TALLY.done.wait()
    del running  # the process exits as soon as the result is out (see finished())
    return TALLY.result()


# saq.


async def saq_noop(ctx: Any) -> None:
    TALLY.add()


async def saq_stamped(ctx: Any, *, sent: float) -> None:
    TALLY.stamp(sent)


async def saq_run(a: argparse.Namespace, ready: Any) -> dict[str, Any]:
    from saq import Queue, Worker

    queue = Queue.from_url(a.url, name=QUEUE)
    await queue.connect()
    if a.action == "enqueue":
        await queue.enqueue("saq_noop")
        seconds = await bounded(
            (lambda: queue.enqueue("saq_noop") for _ in range(a.jobs)), a.concurrency
        )
        await queue.disconnect()
        return {"jobs": a.jobs, "seconds": seconds, "rate": a.jobs / seconds}
    if a.action == "produce":
        await queue.enqueue("saq_stamped", sent=time.time())
        sent = await paced(
            a.rate, a.seconds, lambda: queue.enqueue("saq_stamped", sent=time.time())
        )
        await queue.disconnect()
        return {"jobs": sent + 1}
    worker = Worker(queue, functions=[saq_noop, saq_stamped], concurrency=a.concurrency)
    running = asyncio.create_task(worker.start())
    ready()
    await TALLY.done.wait()
    del running
    return TALLY.result()


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(prog="jobs_side.py")
    parser.add_argument("side", choices=["runnel", "arq", "saq"])
    parser.add_argument("action", choices=["enqueue", "work", "produce", "latency"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0)
    a = parser.parse_args()
    TALLY.target = a.jobs
    run = {"runnel": runnel_run, "arq": arq_run, "saq": saq_run}[a.side]

    async def measure() -> None:
        if a.action == "latency":
            work = argparse.Namespace(**{**vars(a), "action": "work"})
            got = await run(work, lambda: emit({"ready": True}))
            got.update(percentiles(TALLY.latencies))
        else:
            got = await run(a, lambda: None)
        finished(got)

    asyncio.run(measure())


def finished(got: dict[str, Any]) -> None:
    """Print the result and exit at once: how each library stops is not measured, and
    none of their shutdowns (cancelled jobs, closing pools) may hold up or spoil it."""
    emit(got)
    os._exit(0)


if __name__ == "__main__":
    main()
