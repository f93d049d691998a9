"""Latency at a steady rate: a producer process sends 5,000 events/s (25 every 5 ms, each
stamped with ``time.time()`` when sent) for 10 s; a consumer process records, per event,
the time from the stamp to the processor (same machine, same clock). The first second is
warm-up and left out. Runnel's worker has its default settings (reported); the plain side
is the same producer with XADD and an XREADGROUP BLOCK / XACK loop.
"""

from __future__ import annotations

from typing import Any

import redis

from benchmarks.common import Row
from benchmarks.harness import Proc, wait_drained

RATE = 5000
PER_TICK = 25
TARGET_P99_MS = 20.0


def measure(url: str, side: str, seconds: float) -> dict[str, Any]:
    stream, group = f"stamps-{side}", "latency"
    where = ["--url", url, "--stream", stream]
    pace = ["--rate", str(RATE), "--per-tick", str(PER_TICK), "--seconds", str(seconds)]
    consumer = Proc(side, "latency", *where, "--group", group, "--warmup", str(RATE))
    try:
        consumer.line()  # ready: consuming every partition
        producer = Proc(side, "produce", *where, *pace)
        sent = producer.line()
        producer.popen.wait()
        wait_drained(url, stream, group, [consumer])
        result = consumer.stop()
    finally:
        if consumer.alive():
            consumer.popen.kill()
    client = redis.Redis.from_url(url)
    client.delete(*client.keys(f"*{stream}*"))
    client.close()
    result["sent_rate"] = sent["events"] / sent["seconds"]
    return result


def ms(value: float) -> str:
    return f"{value:.1f} ms"


def run(url: str, events: int | None = None, **_: Any) -> list[Row]:
    seconds = (events or 10 * RATE) / RATE
    print(
        f"latency: {RATE:,} events/s ({PER_TICK} every {PER_TICK / RATE * 1000:g} ms) "
        f"for {seconds:g} s, first second left out",
        flush=True,
    )
    got = {side: measure(url, side, seconds) for side in ("runnel", "plain")}
    for side, r in got.items():
        print(
            f"  {side}: sent at {r['sent_rate']:,.0f}/s, measured {r['events']:,} events: "
            f"p50 {ms(r['p50_ms'])}, p99 {ms(r['p99_ms'])}, max {ms(r['max_ms'])}",
            flush=True,
        )
    print(f"  runnel settings: {got['runnel']['settings']}", flush=True)
    ours, plain = got["runnel"], got["plain"]
    rows = []
    for name in ("p50", "p99", "max"):
        key = f"{name}_ms"
        rows.append(
            Row(
                f"latency {name} at 5k/s",
                ms(ours[key]),
                ms(plain[key]),
                f"{ours[key] / plain[key]:.2f}",
            )
        )
    rows[1].target = f"< {TARGET_P99_MS:g} ms"
    rows[1].met = ours["p99_ms"] < TARGET_P99_MS
    return rows
