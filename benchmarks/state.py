"""Tables: counting per key, against a hand-written redis-py loop and Runnel's own
stateless drain, in the same run on the same redis-server.

``python -m benchmarks state [--events N] [--rounds R]``: a backlog of N events (200,000)
over 16 partitions with 10,000 keys, each in the partition Runnel's hasher gives it. Each
run reads all of it through a consumer group of its own:

- Runnel: ``counts[record.key] += 1`` in a table, per event and with ``take(100)``
  (committed with the acknowledgements: exactly once);
- the plain loop: XREADGROUP (COUNT 8, or 100), then one pipeline with an HINCRBY per
  event and the XACK of the read (at least once: the best a user writes by hand);
- Runnel's stateless drain (an empty processor), per event.
"""

from __future__ import annotations

from typing import Any

from benchmarks import harness
from benchmarks.common import Row, drop, fill_keyed, rate, spread

BACKLOG = "keyed"
KEYS = 10_000


def run(url: str, events: int | None = None, rounds: int = 3, **_: Any) -> list[Row]:
    events = events or 200_000
    print(f"state: {events:,} events, {KEYS:,} keys over 16 partitions, best of {rounds}")
    fill_keyed(url, BACKLOG, events, KEYS)

    def count(side: str, group: str, batch: int) -> float:
        return harness.drain(url, BACKLOG, side, group, batch, events, action="count")["rate"]

    def stateless(group: str) -> float:
        return harness.drain(url, BACKLOG, "runnel", group, 1, events)["rate"]

    single = harness.alternate(
        rounds,
        {
            "runnel": lambda n: count("runnel", f"table{n}", 1),
            "plain": lambda n: count("plain", f"hincrby8-{n}", 8),
            "stateless": lambda n: stateless(f"empty{n}"),
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
    return [
        _row("count per key, per event (vs plain)", single["runnel"], single["plain"], 1.0),
        _row("count per key, take(100) (vs plain)", batched["runnel"], batched["plain"], 1.5),
        _row("count per key, per event (vs stateless)", single["runnel"], single["stateless"], 0.7),
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
