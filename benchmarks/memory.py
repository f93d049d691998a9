"""Memory: the worker's resident set while it drains a backlog 10 times larger.

One worker process (per event, empty processor) drains a backlog of EVENTS/10 and then one
of EVENTS (default 100k and 1M); its RSS (/proc/PID/status VmRSS) is sampled every 100 ms
and the peak kept. A worker that buffers a bounded number of events stays flat; the
plain loop is measured the same way for reference.
"""

from __future__ import annotations

from typing import Any

from benchmarks import harness
from benchmarks.common import Row, drop, fill, rate

TARGET_GROWTH = 0.10


def size(events: int) -> str:
    return f"{events / 1_000_000:g}M" if events >= 1_000_000 else f"{events // 1000}k"


def run(url: str, events: int | None = None, **_: Any) -> list[Row]:
    large = events or 1_000_000
    sizes = (large // 10, large)
    print(f"memory: peak worker RSS draining {size(sizes[0])} and {size(sizes[1])}", flush=True)
    peaks: dict[str, list[float]] = {"runnel": [], "plain": []}
    for total in sizes:
        stream = f"mem{total}"
        fill(url, stream, total)
        for side in ("runnel", "plain"):
            r = harness.drain(url, stream, side, "memory", 1 if side == "runnel" else 8, total)
            peaks[side].append(r["peak_rss_mb"])
            print(
                f"  {side}, {size(total)} backlog: peak RSS {r['peak_rss_mb']:.1f} MB "
                f"(drained at {rate(r['rate'])})",
                flush=True,
            )
        drop(url, stream)
    rows = [
        Row(
            f"peak worker RSS, {size(total)} backlog",
            f"{peaks['runnel'][i]:.1f} MB",
            f"{peaks['plain'][i]:.1f} MB",
            f"{peaks['runnel'][i] / peaks['plain'][i]:.2f}",
        )
        for i, total in enumerate(sizes)
    ]
    growth = {side: p[1] / p[0] - 1 for side, p in peaks.items()}
    rows.append(
        Row(
            f"RSS growth {size(sizes[0])} -> {size(sizes[1])}",
            f"{growth['runnel']:+.1%}",
            f"{growth['plain']:+.1%}",
            target=f"within {TARGET_GROWTH:.0%}",
            met=abs(growth["runnel"]) <= TARGET_GROWTH,
        )
    )
    return rows
