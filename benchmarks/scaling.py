"""Scaling: one worker process against two, in two parts.

**Steady state.** The workers (or plain loops) start on an empty stream, gated: Runnel's
until they share the 16 partitions out evenly (8 each with two, as ``runnel status``
shows the locks), then the backlog (EVENTS, default 400k) is written, then all are
released at once. The rate runs from the release to the last event processed: pure
draining, nothing of starting or joining in it. Per event and ``take(100)`` (the plain
loop: COUNT 8 and COUNT 100), 1 and 2 processes, each run with redis-server's CPU
(``INFO cpu``) and command statistics (``INFO commandstats``) taken around the window.

**The cost of a join.** One Runnel worker with default settings (join delay 2 s) owns
every partition and drains a backlog twice as large; half a second after its release a
second worker (default settings) starts. The rest of the drain then takes longer than
the events left at that start would take at the rate the two reach together once both
are draining (measured in the same run, from a second after the hand-over): the
difference is the drain time the join lost, and times that rate the events it did not
drain. The plain loop's second process (nothing to join, only its start-up) the same
way, for comparison.

The machine has 2 cores, which the redis-server shares with the workers: each run prints
every process's share of a core and redis-server's, which tells whether cores were the
limit.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import redis

from benchmarks import harness, serverstats
from benchmarks.common import Row, drop, fill, rate, spread, stream_keys

LEAD = 0.5
"""Seconds the first worker drains alone before the second starts (join run)."""
JOIN_FACTOR = 4
OLD_PREFETCH = 8
"""Runnel's ``prefetch_count`` before 0.2 made it 32: the diagnostic run's setting."""
SETTLE = 1.0
"""Seconds after the second consumer's first event (and, Runnel, the hand-over) before
the rate of the two together is taken as their steady rate."""
BATCHES = {"per event": (1, 8), "take(100)": (100, 100)}  # Runnel's batch, plain COUNT


def steady(
    url: str, side: str, batch: int, processes: int, total: int, n: int, prefetch: int = 0
) -> dict[str, Any]:
    stream = f"steady{n}-{side}{processes}-{batch}-{prefetch}"
    got = harness.gated_drain(
        url,
        stream,
        side,
        "steady",
        batch,
        total,
        processes,
        lambda: fill(url, stream, total, fresh=False),
        ["--prefetch", str(prefetch)] if prefetch else [],
    )
    drop(url, stream)
    e = serverstats.per_event(got["server"], got["events"])
    cpu = " + ".join(f"{share:.0%}" for share in got["cpu"])
    print(
        f"    {side} x{processes} batch {batch}{f' prefetch {prefetch}' if prefetch else ''}: "
        f"{got['rate'] / 1000:,.1f}k/s, CPU: processes "
        f"{cpu}, redis-server {got['redis_cpu']:.0%}; CPU per event: workers "
        f"{got['worker_us']:.2f} us, redis-server {e['cpu_us']:.2f} us (commands "
        f"{e['commands_us']:.2f}); {e['events_per_read']:.1f} events/read",
        flush=True,
    )
    return {**got, **e}


def remaining(client: redis.Redis, stream: str, group: str) -> int:
    """Entries ``group`` has not yet read and acknowledged (lag + pending)."""
    pipe = client.pipeline(transaction=False)
    for key in stream_keys(stream):
        pipe.xinfo_groups(key)
    left = 0
    for groups in pipe.execute():
        mine = next(g for g in groups if g["name"] == group.encode())
        left += (mine.get("lag") or 0) + mine["pending"]
    return left


def join(url: str, side: str, total: int, n: int) -> dict[str, Any]:
    """The first consumer drains alone for LEAD seconds, then a second starts. From that
    start: how soon the second processed its first event, when (Runnel) the partitions
    were shared out 8 and 8, and how long the rest took, against the rate both reached
    once they were draining together (from SETTLE after whichever came last to the end,
    in the same run: the steady state, without the machine's mood between two runs)."""
    stream = f"join{n}-{side}"
    group = f"{side}-join"
    base = ["drain", "--url", url, "--stream", stream, "--group", group, "--batch"]
    base.append("1" if side == "runnel" else "8")
    extra = ["--defaults"] if side == "runnel" else []
    first = harness.Proc(side, *base, *extra, "--gated")
    procs = [first]
    client = redis.Redis.from_url(url)
    timeline: list[tuple[float, int]] = []
    try:
        if side == "plain":
            first.line()
        else:
            harness.settled(url, stream, group, [first])
        fill(url, stream, total, fresh=False)
        first.popen.send_signal(signal.SIGUSR1)
        time.sleep(LEAD)
        left = remaining(client, stream, group)
        started = time.monotonic()
        procs.append(harness.Proc(side, *base, *extra))
        shared = None
        while True:
            for proc in procs:
                if not proc.alive():
                    raise RuntimeError(f"{proc.popen.args} exited")
            now = time.monotonic()
            timeline.append((now - started, remaining(client, stream, group)))
            if not timeline[-1][1]:
                break
            if side == "runnel" and shared is None:
                if sorted(harness.owners(url, stream, group).values()) == [8, 8]:
                    shared = now - started
            time.sleep(0.05)
        harness.wait_drained(url, stream, group, procs)
        results = [proc.stop() for proc in procs]
    finally:
        client.close()
        for proc in procs:
            if proc.alive():
                proc.popen.kill()
    drop(url, stream)
    took = max(r["last"] for r in results) - started
    second = results[1]
    second_first = second["first"] - started if second["events"] else took
    both = max(second_first, shared or 0.0) + SETTLE
    after = [(t, rest) for t, rest in timeline if t >= both]
    if not after or took - after[0][0] < SETTLE:
        print(f"  warning: {side} join: the backlog ran out before both drained", flush=True)
        full = float("nan")
    else:
        full = after[0][1] / (took - after[0][0])
    return {
        "left": left,
        "took": took,
        "second_first": second_first,
        "second_events": second["events"],
        "shared": shared,
        "full_rate": full,
        "lost": took - left / full,
    }


def run(url: str, events: int | None = None, rounds: int = 3, **_: Any) -> list[Row]:
    total = events or 400_000
    print(
        f"scaling: steady state ({total:,} events written once the workers own their "
        f"partitions), 1 and 2 processes, per event and take(100); then a second worker "
        f"joining a drain of {JOIN_FACTOR * total:,}; {rounds} rounds",
        flush=True,
    )
    got: dict[str, list[dict[str, Any]]] = {}
    for n in range(rounds):
        for label, (rb, pb) in BATCHES.items():
            for p in (1, 2):
                for side, batch in (("runnel", rb), ("plain", pb)):
                    r = steady(url, side, batch, p, total, n)
                    got.setdefault(f"{side} x{p} {label}", []).append(r)
        # What the default prefetch_count of 32 gains: one worker with the old 8.
        r = steady(url, "runnel", 1, 1, total, n, prefetch=OLD_PREFETCH)
        got.setdefault("runnel x1 old prefetch", []).append(r)
        for side in ("runnel", "plain"):
            j = join(url, side, JOIN_FACTOR * total, n)
            got.setdefault(f"{side} join", []).append(j)
            shared = "-" if j["shared"] is None else f"+{j['shared']:.2f}s"
            print(
                f"    {side} join: {j['left']:,} left at the second's start, drained in "
                f"{j['took']:.2f}s; its first event at +{j['second_first']:.2f}s, "
                f"partitions shared at {shared}; both then at {j['full_rate'] / 1000:,.1f}k/s; "
                f"lost {j['lost']:.2f}s ({j['lost'] * j['full_rate'] / 1000:,.0f}k events not "
                "drained)",
                flush=True,
            )
        print(f"  round {n + 1} done", flush=True)
    print_breakdowns(got, total)
    return rows(got)


def print_breakdowns(got: dict[str, list[dict[str, Any]]], total: int) -> None:
    """The last round's per-command tables (the figures move little between rounds)."""
    print("\nredis-server per command, last round (nested: inside EXEC or a script above)")
    for label in BATCHES:
        for p in (1, 2):
            for side in ("runnel", "plain"):
                r = got[f"{side} x{p} {label}"][-1]
                print()
                print(serverstats.breakdown_table(f"{side} x{p}, {label}", r["server"], total))


def rows(got: dict[str, list[dict[str, Any]]]) -> list[Row]:
    out = []

    def rates(key: str) -> list[float]:
        return [r["rate"] for r in got[key]]

    for label in BATCHES:
        for p in (1, 2):
            runnel, plain = rates(f"runnel x{p} {label}"), rates(f"plain x{p} {label}")
            out.append(
                Row(
                    f"steady {label}, {p} process{'es' if p > 1 else ''}",
                    rate(max(runnel)),
                    rate(max(plain)),
                    f"{max(runnel) / max(plain):.2f}",
                    spread=f"{spread(runnel)}/{spread(plain)}",
                )
            )
        ups = {
            side: sorted(
                two["rate"] / one["rate"]
                for one, two in zip(
                    got[f"{side} x1 {label}"], got[f"{side} x2 {label}"], strict=True
                )
            )
            for side in ("runnel", "plain")
        }
        out.append(
            Row(
                f"steady {label}, speed-up 2/1 (range)",
                span(ups["runnel"], "x"),
                span(ups["plain"], "x"),
            )
        )
        for p in (1, 2):
            worker = {
                side: sorted(r["worker_us"] for r in got[f"{side} x{p} {label}"])
                for side in ("runnel", "plain")
            }
            out.append(
                Row(
                    f"worker CPU us/event, {label}, {p} proc (range)",
                    span(worker["runnel"], ""),
                    span(worker["plain"], ""),
                    f"{median(worker['runnel']) / median(worker['plain']):.2f}",
                )
            )
            cost = {
                side: sorted(r["cpu_us"] for r in got[f"{side} x{p} {label}"])
                for side in ("runnel", "plain")
            }
            out.append(
                Row(
                    f"redis CPU us/event, {label}, {p} proc (range)",
                    span(cost["runnel"], ""),
                    span(cost["plain"], ""),
                    f"{median(cost['runnel']) / median(cost['plain']):.2f}",
                )
            )
            reads = {
                side: median([r["events_per_read"] for r in got[f"{side} x{p} {label}"]])
                for side in ("runnel", "plain")
            }
            out.append(
                Row(
                    f"events per read, {label}, {p} proc",
                    f"{reads['runnel']:.1f}",
                    f"{reads['plain']:.1f}",
                )
            )
    out.append(bound(got))
    wide = got["runnel x1 old prefetch"]
    ups = sorted(
        w["rate"] / one["rate"] for w, one in zip(wide, got["runnel x1 per event"], strict=True)
    )
    label = f"per event, 1 proc, prefetch_count {OLD_PREFETCH}"
    out += [
        Row(f"steady {label}", rate(max(r["rate"] for r in wide)), "-", span(ups, "x")),
        Row(f"worker CPU us/event, {label}", span(sorted(r["worker_us"] for r in wide), ""), "-"),
        Row(f"redis CPU us/event, {label}", span(sorted(r["cpu_us"] for r in wide), ""), "-"),
        Row(
            f"events per read, {label}",
            f"{median([r['events_per_read'] for r in wide]):.1f}",
            "-",
        ),
    ]
    lost = {side: sorted(j["lost"] for j in got[f"{side} join"]) for side in ("runnel", "plain")}
    first = {
        side: sorted(j["second_first"] for j in got[f"{side} join"]) for side in ("runnel", "plain")
    }
    shared = sorted(j["shared"] or 0.0 for j in got["runnel join"])
    beyond = sorted(
        r["lost"] - p["lost"] for r, p in zip(got["runnel join"], got["plain join"], strict=True)
    )
    out += [
        Row(
            "join: second's first event after its start",
            span(first["runnel"], "s"),
            span(first["plain"], "s"),
        ),
        Row("join: partitions shared 8 and 8 after its start", span(shared, "s"), "-"),
        Row(
            "join: drain time lost vs both together",
            span(lost["runnel"], "s"),
            span(lost["plain"], "s"),
        ),
        Row("join: lost beyond the plain loop's", span(beyond, "s"), "-"),
    ]
    return out


def bound(got: dict[str, list[dict[str, Any]]]) -> Row:
    """The speed-up two cores allow, from CPU per event alone (median of the rounds): one
    process runs at most a core's worth of its own CPU per event; two at most share two
    cores with redis-server, so 2 cores / (workers + redis-server per event). Machine load
    changes the rates, much less the CPU each event takes."""

    def allowed(side: str) -> float:
        one = got[f"{side} x1 per event"]
        two = got[f"{side} x2 per event"]
        alone = 1e6 / median([r["worker_us"] for r in one])
        shared = 2e6 / median([r["worker_us"] + r["cpu_us"] for r in two])
        return min(shared, 2 * alone) / alone

    return Row(
        "per event: speed-up 2 cores allow, from CPU/event",
        f"{allowed('runnel'):.2f}x",
        f"{allowed('plain'):.2f}x",
    )


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def span(values: list[float], unit: str) -> str:
    """``low-high`` of several rounds (``low to high`` if one is negative; one value when
    they agree to the digit)."""
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    if low == high:
        return f"{low}{unit}"
    return f"{low} to {high}{unit}" if min(values) < 0 else f"{low}-{high}{unit}"
