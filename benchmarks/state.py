"""Tables: counting per key, against a hand-written redis-py loop and Runnel's own
stateless drain, in the same run on the same redis-server.

``python -m benchmarks state [--events N] [--rounds R]``: a backlog of N events (200,000)
over 16 partitions with 10,000 keys, each in the partition Runnel's hasher gives it. Each
run reads all of it through a consumer group of its own:

- Runnel: ``counts[record.key] += 1`` in a table, per event and with ``take(100)``
  (committed with the acknowledgements: exactly once);
- the plain loop: XREADGROUP (COUNT 8, or 100), then one pipeline with an HINCRBY per
  event and the XACK of the read (at least once: the best a user writes by hand);
- Runnel's stateless drain (an empty processor), per event;
- Runnel counting per key and 1-minute tumbling window (the entries' own time), per event.

Then the take-over of a partition whose table holds 100,000 keys (takeover.py), and the
worker's peak RSS counting 100,000 distinct keys and then 1,000,000 (each a backlog of as
many events): the cache of decoded values is bounded (``table_cache_size``), so it stays
flat.
"""

from __future__ import annotations

from typing import Any

from benchmarks import harness, takeover
from benchmarks.common import Row, drop, fill_keyed, rate, spread
from benchmarks.memory import TARGET_GROWTH, size

BACKLOG = "keyed"
KEYS = 10_000


def run(url: str, events: int | None = None, rounds: int = 3, **_: Any) -> list[Row]:
    events = events or 200_000
    print(f"state: {events:,} events, {KEYS:,} keys over 16 partitions, best of {rounds}")
    fill_keyed(url, BACKLOG, events, KEYS)

    def count(side: str, group: str, batch: int, window: float | None = None) -> float:
        extra = ["--window", str(window)] if window else []
        found = harness.drain(url, BACKLOG, side, group, batch, events, action="count", extra=extra)
        return found["rate"]

    def stateless(group: str) -> float:
        return harness.drain(url, BACKLOG, "runnel", group, 1, events)["rate"]

    single = harness.alternate(
        rounds,
        {
            "runnel": lambda n: count("runnel", f"table{n}", 1),
            "plain": lambda n: count("plain", f"hincrby8-{n}", 8),
            "stateless": lambda n: stateless(f"empty{n}"),
            "tumbling": lambda n: count("runnel", f"minute{n}", 1, window=60),
        },
        "count per key, per event",
    )
    batched = harness.alternate(
        rounds,
        {
            "runnel": lambda n: count("runnel", f"table-take{n}", 100),
            "plain": lambda n: count("plain", f"hincrby100-{n}", 100),
        },
        "count per key, take(100)",
    )
    drop(url, BACKLOG)
    rows = [
        _row("count per key, per event (vs plain)", single["runnel"], single["plain"], 1.0),
        _row("count per key, take(100) (vs plain)", batched["runnel"], batched["plain"], 1.5),
        _row("count per key, per event (vs stateless)", single["runnel"], single["stateless"], 0.7),
        _row(
            "1-minute tumbling count (vs stateless)", single["tumbling"], single["stateless"], 0.6
        ),
    ]
    rows += takeover.run(url)
    rows += rss(url)
    return rows


def rss(url: str, small: int = 100_000, large: int = 1_000_000) -> list[Row]:
    """Peak worker RSS counting ``small`` distinct keys, then ``large``."""
    peaks = []
    for keys in (small, large):
        stream = f"distinct{keys}"
        fill_keyed(url, stream, keys, keys)
        found = harness.drain(url, stream, "runnel", "rss", 1, keys, action="count")
        drop(url, stream)
        peaks.append(found["peak_rss_mb"])
        print(f"  table of {size(keys)} keys: peak RSS {peaks[-1]:.1f} MB", flush=True)
    growth = peaks[1] / peaks[0] - 1
    return [
        Row(
            f"peak worker RSS, table of {size(large)} keys vs {size(small)}",
            f"{peaks[1]:.1f} MB",
            f"{peaks[0]:.1f} MB",
            f"{growth:+.1%}",
            f"within {TARGET_GROWTH:.0%}",
            abs(growth) <= TARGET_GROWTH,
        )
    ]


def _row(figure: str, ours: list[float], theirs: list[float], target: float) -> Row:
    best, base = max(ours), max(theirs)
    return Row(
        figure,
        rate(best),
        rate(base),
        f"{best / base:.2f}",
        f">= {target}",
        best / base >= target,
        f"{spread(ours)}/{spread(theirs)}",
    )
