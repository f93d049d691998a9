"""Throughput: one worker process draining a backlog (per event and ``take(100)``), and
sending, each next to the plain redis-py loop doing the same work in the same run.

Drains: a backlog of EVENTS Ping records spread evenly over 16 partitions, filled once;
every run reads all of it through a consumer group of its own, so every run gets the
same data. The processor is empty (``async for _ in events.records()``); the plain loop
reads COUNT 8 per partition for the per-event figure and COUNT 100 for the batched one.
Sends: batches of 1000 through ``stream.send(*records)`` against pipelined XADD in
MULTI/EXEC, into emptied partitions. Runnel's send is measured twice in one process,
each batch with its call's identity (the default) and one without
(``idempotent_sends=False``) in turn, so that the ratio of the two holds however busy
the machine is. Targets: a send with identities at 1.5 times the plain loop and 0.9 of
one without (issue 33). Each figure is the best of ROUNDS runs, the sides taking turns.
"""

from __future__ import annotations

from typing import Any

from benchmarks import harness
from benchmarks.common import Row, drop, fill, rate, spread
from benchmarks.harness import Proc

BACKLOG = "pings"
SENT = "sent"
SEND_BATCH = 1000


def send_rate(url: str, side: str, events: int) -> float:
    drop(url, SENT)
    args = ["--url", url, "--stream", SENT, "--events", str(events), "--batch", str(SEND_BATCH)]
    proc = Proc(side, "send", *args)
    result = proc.line()
    proc.popen.wait()
    return result["events"] / result["seconds"]


def send_rates(url: str, events: int) -> tuple[float, float]:
    """Runnel's send with identities and without, in turn in one process: their rates."""
    names = [f"{SENT}-with", f"{SENT}-without"]
    for name in names:
        drop(url, name)
    args = ["--url", url, "--stream", SENT, "--events", str(events), "--batch", str(SEND_BATCH)]
    proc = Proc("runnel", "send", *args, "--both")
    result = proc.line()
    proc.popen.wait()
    for name in names:
        drop(url, name)
    return result["events"] / result["seconds"], result["events"] / result["seconds_without"]


def sends(url: str, events: int, rounds: int) -> dict[str, list[float]]:
    """Each round: Runnel's two sends (in turn, one process), then the plain loop."""
    got: dict[str, list[float]] = {"runnel": [], "without": [], "plain": []}
    for n in range(rounds):
        with_identities, without = send_rates(url, events)
        got["runnel"].append(with_identities)
        got["without"].append(without)
        got["plain"].append(send_rate(url, "plain", events))
        figures = "   ".join(f"{name} {values[-1] / 1000:,.1f}k/s" for name, values in got.items())
        print(f"  send (batches of {SEND_BATCH}), round {n + 1}: {figures}", flush=True)
    return got


def drain_rate(url: str, side: str, group: str, batch: int, events: int) -> float:
    return harness.drain(url, BACKLOG, side, group, batch, events)["rate"]


def row(
    figure: str,
    got: dict[str, list[float]],
    target: float,
    side: str = "runnel",
    base: str = "plain",
) -> Row:
    """``side``'s best against ``base``'s (the plain loop unless said)."""
    ours, plain = max(got[side]), max(got[base])
    return Row(
        figure,
        rate(ours),
        rate(plain),
        f"{ours / plain:.2f}",
        f">= {target}",
        ours / plain >= target,
        f"{spread(got[side])}/{spread(got[base])}",
    )


def run(url: str, events: int | None = None, rounds: int = 3, **_: Any) -> list[Row]:
    events = events or 200_000
    print(f"throughput: {events:,} events over 16 partitions, best of {rounds}", flush=True)
    fill(url, BACKLOG, events)
    sent = sends(url, events, rounds)
    single = harness.alternate(
        rounds,
        {
            "runnel": lambda n: drain_rate(url, "runnel", f"records{n}", 1, events),
            "plain": lambda n: drain_rate(url, "plain", f"count8-{n}", 8, events),
        },
        "per event",
    )
    batched = harness.alternate(
        rounds,
        {
            "runnel": lambda n: drain_rate(url, "runnel", f"take{n}", 100, events),
            "plain": lambda n: drain_rate(url, "plain", f"count100-{n}", 100, events),
        },
        "take(100)",
    )
    drop(url, BACKLOG)
    drop(url, SENT)
    return [
        row(f"send, batches of {SEND_BATCH}", sent, 1.5),
        row("send without identities", sent, 0.9, side="without"),
        row("send, identities / without (baseline: without)", sent, 0.9, base="without"),
        row("process per event, records()", single, 0.6),
        row("process batched, take(100)", batched, 0.75),
    ]
