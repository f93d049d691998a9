"""Tracing overhead: the per-event and ``take(100)`` drains of the throughput benchmark
with runnel-otel absent, installed but idle (no tracer provider: the default), and on,
taking turns in the same run against the same backlog.

"Absent" unregisters the plugin in the worker process, as if it were not installed.
"On" sets an SDK tracer provider with a batch span processor whose exporter drops the
spans: every span is made, filled and handed over, but nothing is sent, so the figure is
Runnel's and the SDK's cost, not a collector's. Every entry of the backlog carries a
``traceparent`` (as a traced producer writes it), so each processing span has a parent.
Each figure is the best of the rounds; the worker's CPU time per event (median) is
printed too, being less sensitive to other work on the machine than a rate.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

import orjson
import redis

from benchmarks import harness
from benchmarks.common import PARTITIONS, Row, drop, rate, spread, stream_keys

BACKLOG = "traced"
MODES = ("absent", "idle", "on")


def fill_traced(url: str, total: int, chunk: int = 20_000) -> None:
    """Ping entries as a traced producer writes them: ``data`` and a ``traceparent``."""
    client = redis.Redis.from_url(url)
    partitions = stream_keys(BACKLOG)
    client.delete(*partitions)
    for start in range(0, total, chunk):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(start + chunk, total)):
            data = orjson.dumps({"key": f"k{i}", "n": i})
            parent = f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01"
            pipe.execute_command(
                "XADD", partitions[i % PARTITIONS], "*", "data", data, "traceparent", parent
            )
        pipe.execute()
    client.close()


def drain(url: str, mode: str, group: str, batch: int, events: int, cpu: list[float]) -> float:
    """The drain's rate; appends the worker's CPU microseconds per event to ``cpu``."""
    extra = ["--tracing", mode]
    result = harness.drain(url, BACKLOG, "runnel", group, batch, events, extra=extra)
    cpu.append(result["cpu_seconds"] / result["events"] * 1e6)
    return float(result["rate"])


def run(url: str, events: int | None = None, rounds: int = 3, **_: Any) -> list[Row]:
    events = events or 100_000
    print(f"tracing: {events:,} events over 16 partitions, {', '.join(MODES)}, best of {rounds}")
    fill_traced(url, events)
    rows = []
    for label, batch in (("per event, records()", 1), ("batched, take(100)", 100)):
        cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
        got = harness.alternate(
            rounds,
            {
                mode: lambda n, m=mode, b=batch, c=cpu[mode]: drain(
                    url, m, f"{m}{b}-{n}", b, events, c
                )
                for mode in MODES
            },
            label,
        )
        middle = {mode: statistics.median(values) for mode, values in cpu.items()}
        print(
            f"  {label}: worker CPU per event, median: "
            + ", ".join(f"{mode} {us:.2f} us" for mode, us in middle.items()),
            flush=True,
        )
        base = max(got["absent"])
        for mode, target in (("idle", 0.95), ("on", None)):
            best = max(got[mode])
            rows.append(
                Row(
                    f"process {label}, runnel-otel {mode}",
                    rate(best),
                    rate(base),
                    f"{best / base:.2f}",
                    f">= {target}" if target else "(measured)",
                    best / base >= target if target else True,
                    f"{spread(got[mode])}/{spread(got['absent'])}",
                )
            )
    drop(url, BACKLOG)
    return rows
