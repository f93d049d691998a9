"""Metrics overhead: the throughput drains (per event, and ``take(100)``) with Prometheus
metrics on, against the same drains with metrics off, in the same run.

"On" is a worker started with ``metrics_port``, and a scraper reading its ``/metrics``
every second meanwhile (a busier scrape than Prometheus's usual 15 s). Both sides drain
the same backlog through consumer groups of their own, taking turns round after round;
each figure is the best of the rounds. Target: on >= 0.95 of off.

On a busy machine the rates swing more than the difference sought, so the worker's own
CPU time per event (from the first event to its stop, flushes and scrapes included) is
printed too, the median of the rounds: less sensitive to other work than a rate.
"""

from __future__ import annotations

import statistics
import threading
import urllib.request
from typing import Any

from benchmarks import harness
from benchmarks.common import Row, drop, fill, rate, spread
from benchmarks.throughput import BACKLOG

SCRAPE_EVERY = 1.0
TARGET = 0.95


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Scraper(threading.Thread):
    """Reads http://127.0.0.1:port/metrics every second until stopped; counts replies."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.stopping = threading.Event()
        self.replies = 0

    def run(self) -> None:
        while not self.stopping.wait(SCRAPE_EVERY):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as reply:
                    reply.read()
                self.replies += 1
            except OSError:
                pass  # not serving yet


def drain(url: str, group: str, batch: int, events: int, metrics: bool, cpu: list[float]) -> float:
    """The drain's rate; appends the worker's CPU microseconds per event to ``cpu``."""
    if not metrics:
        result = harness.drain(url, BACKLOG, "runnel", group, batch, events)
        cpu.append(result["cpu_seconds"] / result["events"] * 1e6)
        return float(result["rate"])
    port = free_port()
    scraper = Scraper(port)
    scraper.start()
    try:
        extra = ["--metrics-port", str(port)]
        result = harness.drain(url, BACKLOG, "runnel", group, batch, events, extra=extra)
    finally:
        scraper.stopping.set()
        scraper.join()
    if not scraper.replies:
        raise RuntimeError("the worker with metrics on never answered a scrape")
    cpu.append(result["cpu_seconds"] / result["events"] * 1e6)
    return float(result["rate"])


def run(url: str, events: int | None = None, rounds: int = 3, **_: Any) -> list[Row]:
    events = events or 200_000
    print(f"metrics: {events:,} events over 16 partitions, off and on, best of {rounds}")
    fill(url, BACKLOG, events)
    rows = []
    for label, batch in (("per event, records()", 1), ("batched, take(100)", 100)):
        cpu_on: list[float] = []
        cpu_off: list[float] = []
        got = harness.alternate(
            rounds,
            {
                "on": lambda n, b=batch, c=cpu_on: drain(url, f"on{b}-{n}", b, events, True, c),
                "off": lambda n, b=batch, c=cpu_off: drain(url, f"off{b}-{n}", b, events, False, c),
            },
            label,
        )
        mid_on, mid_off = statistics.median(cpu_on), statistics.median(cpu_off)
        print(
            f"  {label}: worker CPU per event, median: on {mid_on:.2f} us, off {mid_off:.2f} us "
            f"(on/off {mid_on / mid_off:.3f})",
            flush=True,
        )
        on, off = max(got["on"]), max(got["off"])
        rows.append(
            Row(
                f"process {label}, metrics on",
                rate(on),
                rate(off),
                f"{on / off:.2f}",
                f">= {TARGET}",
                on / off >= TARGET,
                f"{spread(got['on'])}/{spread(got['off'])}",
            )
        )
    drop(url, BACKLOG)
    return rows
