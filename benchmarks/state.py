"""Tables: counting per key, against a hand-written redis-py loop in the same run on the
same redis-server.

``python -m benchmarks state [--events N] [--rounds R]``: a backlog of N events (200,000)
over 16 partitions with 10,000 keys, each in the partition Runnel's hasher gives it. Each
run reads all of it through a consumer group of its own:

- Runnel: ``counts[record.key] += 1`` in a table, per event and with ``take(100)``
  (committed with the acknowledgements: exactly once);
- the plain loop: XREADGROUP (COUNT 8, or 100), then one pipeline with an HINCRBY per
  event and the XACK of the read (at least once: the best a user writes by hand);
- Runnel counting per key and 1-minute tumbling window (the entries' own time), per
  event, against the plain loop (COUNT 8) doing HINCRBY into the hash of the entry's
  minute, given an hour to live as Runnel's ``expires=3600``;
- Runnel's stateless drain (an empty processor), per event: no target, the figure the
  worker's CPU per event of the tables is measured over.

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
MINUTE = 60.0


def run(url: str, events: int | None = None, rounds: int = 3, **_: Any) -> list[Row]:
    events = events or 200_000
    print(f"state: {events:,} events, {KEYS:,} keys over 16 partitions, best of {rounds}")
    fill_keyed(url, BACKLOG, events, KEYS)
    cpu: dict[str, list[float]] = {}

    def count(
        side: str, group: str, batch: int, window: float | None = None, action: str = "count"
    ) -> float:
        extra = ["--window", str(window)] if window else []
        found = harness.drain(url, BACKLOG, side, group, batch, events, action=action, extra=extra)
        if side == "runnel" and batch == 1:  # the worker's CPU per event, in µs
            name = "stateless" if action == "drain" else ("tumbling" if window else "counting")
            cpu.setdefault(name, []).append(found["cpu_seconds"] * 1e6 / found["events"])
        return float(found["rate"])

    single = harness.alternate(
        rounds,
        {
            "runnel": lambda n: count("runnel", f"table{n}", 1),
            "plain": lambda n: count("plain", f"hincrby8-{n}", 8),
            "tumbling": lambda n: count("runnel", f"minute{n}", 1, window=MINUTE),
            "plain tumbling": lambda n: count("plain", f"minute8-{n}", 8, window=MINUTE),
            "stateless": lambda n: count("runnel", f"empty{n}", 1, action="drain"),
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
        _row(
            "1-minute tumbling count (vs plain)",
            single["tumbling"],
            single["plain tumbling"],
            1.5,
        ),
    ]
    rows += floor(single["stateless"], cpu)
    rows += takeover.run(url)
    rows += rss(url)
    return rows


def floor(stateless: list[float], cpu: dict[str, list[float]]) -> list[Row]:
    """The stateless drain's best rate, and the worker's CPU per event (the least of each
    drain's runs) there and what a table and a tumbling window add to it: figures of what
    the tables cost over the floor, not targets."""
    base = min(cpu["stateless"])
    added = " ".join(f"+{min(cpu[name]) - base:.1f}" for name in ("counting", "tumbling"))
    return [
        Row(
            "stateless drain, per event (no target)",
            rate(max(stateless)),
            "",
            spread=spread(stateless),
        ),
        Row("worker CPU/event: stateless, +count, +tumbling", f"{base:.1f} {added} µs", ""),
    ]


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
