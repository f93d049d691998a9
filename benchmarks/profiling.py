"""``python -m benchmarks profile [records|take] [--events N]``: where a worker's time goes.

Two profiles of a worker draining a backlog (default 200k) with the throughput benchmark's
empty processor, per event (``records``) or ``take(100)``:

* pyinstrument, in this process, over the whole event loop thread (``async_mode=
  "disabled"``), so the time the loop waits for Redis shows up as the selector's
  ``select``; the call tree is printed and saved as HTML;
* py-spy, from outside, on a worker process of the throughput benchmark (``--idle``, so
  waiting is counted too): no overhead in the worker, which pyinstrument cannot say.

Each is then summed up by what the time is spent on (``CATEGORIES``), in percent. Before
them, the same drain runs without a profiler with ``gc_freeze`` off and on, counting the
garbage collector's passes and their time.
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import signal
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from time import perf_counter

import redis

from benchmarks.common import APP, PARTITIONS, Ping, fill, server
from benchmarks.harness import Proc, wait_drained
from benchmarks.tally import Tally
from runnel import App
from runnel.runtime.worker import Worker

# (function, file) -> what that time is spent on. The innermost frame of a stack that
# matches decides, so decoding inside the event generator counts as decoding.
CATEGORIES = [
    ("select", "selectors", "waiting: event loop idle (Redis, network)"),
    ("_send_packed_command", "redis/asyncio/connection.py", "socket I/O: sending, receiving"),
    ("_read_ready", "asyncio/selector_events.py", "socket I/O: sending, receiving"),
    ("decode", "runnel/stream.py", "decoding records (pydantic)"),
    ("read", "runnel_redis/coordination.py", "fenced read: the exchange, reply parsing"),
    ("_fetch", "processing/fetcher.py", "fetcher: inboxes, scheduling reads"),
    ("ack", "runnel_redis/coordination.py", "acknowledgements: fenced XACK script"),
    ("run", "processing/acks.py", "acknowledgements: fenced XACK script"),
    ("empty", "benchmarks/", "the processor body (counting events)"),
    ("_single", "processing/events.py", "events()/take(): generators, inbox, acks.add"),
    ("_batches", "processing/events.py", "events()/take(): generators, inbox, acks.add"),
]
OTHER = "asyncio scheduling, start-up and the rest"


def category(stack: list[tuple[str, str]]) -> str:
    for function, path in reversed(stack):
        function = function.rsplit(".", 1)[-1]  # py-spy qualifies names: Stream.decode
        for name, where, what in CATEGORIES:
            if function == name and where in path:
                return what
    return OTHER


def summary(samples: Counter[tuple[tuple[str, str], ...]]) -> str:
    """Time per category, in percent, from (stack -> time) samples."""
    total = sum(samples.values())
    spent: Counter[str] = Counter()
    for stack, time in samples.items():
        spent[category(list(stack))] += time
    return "\n".join(f"  {share / total:6.1%}  {what}" for what, share in spent.most_common())


async def drain(url: str, batch: int, total: int, group: str = "profile", **settings) -> float:  # type: ignore[no-untyped-def]
    app = App(name=APP, redis_url=url, default_join_delay=0, **settings)
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=PARTITIONS)
    tally = Tally()
    done = asyncio.Event()

    @app.processor(pings, name=group)
    async def empty(events):  # type: ignore[no-untyped-def]
        if batch == 1:
            async for _ in events.records():
                tally.add(1)
                if tally.count >= total:
                    done.set()
        else:
            async for records in events.take(batch, within=0.01).records():
                tally.add(len(records))
                if tally.count >= total:
                    done.set()

    worker = Worker(app)
    running = asyncio.create_task(worker.run())
    await done.wait()
    worker.stop()
    await running
    return tally.rate()


def pyinstrument_samples(frame, stack=()) -> Counter:  # type: ignore[no-untyped-def]
    """A pyinstrument call tree as (stack -> self time)."""
    stack = (*stack, (frame.function, frame.file_path or ""))
    samples = Counter({stack: frame.total_self_time})
    for child in frame.children:
        samples += pyinstrument_samples(child, stack)
    return samples


def with_pyinstrument(url: str, batch: int, total: int, case: str) -> None:
    from pyinstrument import Profiler

    client = redis.Redis.from_url(url)
    client.config_resetstat()
    profiler = Profiler(async_mode="disabled")
    profiler.start()
    speed = asyncio.run(drain(url, batch, total))
    profiler.stop()
    stats = client.info("commandstats")
    client.close()
    print(profiler.output_text(unicode=False, color=False))
    out = Path(tempfile.gettempdir()) / f"runnel-profile-{case}.html"
    out.write_text(profiler.output_html())
    print(f"pyinstrument, {case}: {speed:,.0f} events/s under the profiler; HTML: {out}")
    root = profiler.last_session.root_frame() if profiler.last_session else None
    if root is not None:
        print(summary(pyinstrument_samples(root)))
    print(
        "Redis's side (INFO commandstats; EVAL: read fences and acks, EVALSHA: heartbeats;"
        " a script's time includes the commands it runs):"
    )
    for command in ("eval", "evalsha", "watch", "exec", "xreadgroup", "xack"):
        got = stats.get(f"cmdstat_{command}", {})
        print(f"  {command:<10} {got.get('calls', 0):>7} calls {got.get('usec_per_call', 0):>9} us")


def with_py_spy(url: str, batch: int, total: int, case: str) -> None:
    out = Path(tempfile.gettempdir()) / f"runnel-py-spy-{case}.txt"
    args = ["--url", url, "--stream", "pings", "--group", f"py-spy-{case}", "--batch", str(batch)]
    worker = Proc("runnel", "drain", *args)
    options = ["--idle", "-r", "250", "-f", "raw", "-o", str(out)]
    spy = subprocess.Popen(
        ["py-spy", "record", *options, "--pid", str(worker.pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_drained(url, "pings", f"py-spy-{case}", [worker])
        spy.send_signal(signal.SIGINT)  # py-spy writes its file when interrupted
        spy.wait()
        result = worker.stop()
    finally:
        for proc in (spy, worker.popen):
            if proc.poll() is None:
                proc.kill()
    speed = (result["events"] - result["untimed"]) / (result["last"] - result["first"])
    samples: Counter[tuple[tuple[str, str], ...]] = Counter()
    for line in out.read_text().splitlines():
        frames, _, count = line.rpartition(" ")
        if "importlib" in frames:
            continue  # the process starting up
        stack = []
        for frame in frames.split(";"):
            function, _, where = frame.partition(" (")
            stack.append((function, where))
        samples[tuple(stack)] += int(count)
    print(f"py-spy, {case}: {speed:,.0f} events/s while sampled; raw stacks: {out}")
    print(summary(samples))


def garbage_collection(url: str, batch: int, total: int) -> None:
    """The same drain without a profiler, with and without ``gc_freeze``: the rate, and
    the collector's passes per generation and their time (worker start-up included)."""
    print("garbage collection while draining, no profiler:")
    for freeze in (False, True):
        passes: dict[int, list[float]] = {0: [], 1: [], 2: []}
        started = [0.0]

        def count(phase: str, info: dict, passes=passes, started=started) -> None:  # type: ignore[no-untyped-def]
            if phase == "start":
                started[0] = perf_counter()
            else:
                passes[info["generation"]].append(perf_counter() - started[0])

        gc.callbacks.append(count)
        try:
            speed = asyncio.run(drain(url, batch, total, f"gc-{freeze}", gc_freeze=freeze))
        finally:
            gc.callbacks.remove(count)
        spent = ", ".join(
            f"gen{g} {len(t)} x {sum(t) / len(t) * 1000:.2f} ms" if t else f"gen{g} 0"
            for g, t in passes.items()
        )
        print(f"  gc_freeze={freeze}: {speed:,.0f} events/s; {spent}")


def run(case: str, events: int | None) -> None:
    if case not in ("records", "take"):
        raise SystemExit("profile: records or take")
    total = events or 200_000
    batch = 1 if case == "records" else 100
    with server() as url:
        fill(url, "pings", total)
        garbage_collection(url, batch, total)
        print()
        with_pyinstrument(url, batch, total, case)
        if shutil.which("py-spy"):
            print()
            with_py_spy(url, batch, total, case)
