"""Scaling: the same backlog (EVENTS, default 400k) drained by one worker process, then by
two in the same processor group (per event, empty processor), and the plain loop with one
and two processes in one consumer group. The two workers start together and share the
partitions out as they join, and that is in the figure. The machine has 2 cores, which
the redis-server shares with the workers: two processes cannot double the rate here.
Each run prints the share of a core every process used (redis-server's counted from
the start of the run), which tells whether the cores were the limit.
"""

from __future__ import annotations

from typing import Any

from benchmarks import harness
from benchmarks.common import Row, drop, fill, rate, spread

BACKLOG = "scale"


def run(url: str, events: int | None = None, rounds: int = 3, **_: Any) -> list[Row]:
    total = events or 400_000
    print(f"scaling: {total:,} events, 1 and 2 processes, best of {rounds}", flush=True)
    fill(url, BACKLOG, total)

    def drain(side: str, processes: int):  # type: ignore[no-untyped-def]
        batch = 1 if side == "runnel" else 8

        def run(n: int) -> float:
            got = harness.drain(
                url, BACKLOG, side, f"scale{processes}-{n}", batch, total, processes
            )
            cpu = " + ".join(f"{share:.0%}" for share in got["cpu"])
            print(
                f"    {side} x{processes}: {got['rate'] / 1000:,.1f}k/s, CPU: "
                f"processes {cpu}, redis-server {got['redis_cpu']:.0%} (of one core each)",
                flush=True,
            )
            return got["rate"]

        return run

    # One round runs all four, so a busy spell of the machine hits 1 and 2 processes alike.
    got = harness.alternate(
        rounds,
        {f"{side} x{p}": drain(side, p) for p in (1, 2) for side in ("runnel", "plain")},
        "1 and 2 processes",
    )
    drop(url, BACKLOG)
    best = {name: max(values) for name, values in got.items()}
    rows = [
        Row(
            f"per event, {p} worker process{'es' if p > 1 else ''}",
            rate(best[f"runnel x{p}"]),
            rate(best[f"plain x{p}"]),
            f"{best[f'runnel x{p}'] / best[f'plain x{p}']:.2f}",
            spread=f"{spread(got[f'runnel x{p}'])}/{spread(got[f'plain x{p}'])}",
        )
        for p in (1, 2)
    ]
    rows.append(
        Row(
            "speed-up, 2 processes / 1",
            f"{best['runnel x2'] / best['runnel x1']:.2f}x",
            f"{best['plain x2'] / best['plain x1']:.2f}x",
        )
    )
    return rows
