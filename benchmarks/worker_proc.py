"""One side of one benchmark in a fresh process; its result is one JSON line on stdout.

``python -m benchmarks.worker_proc {runnel,plain} {drain,send,latency,produce} --url URL
--stream NAME [options]``. Consumers (``drain``, ``latency``) run until SIGTERM; ``latency``
first prints ``{"ready": true}`` once it is consuming. The harness (harness.py) starts
these, so Runnel's worker and the plain loop each get a process of their own.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import orjson

from benchmarks import plain_side, runnel_side


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(orjson.dumps(obj).decode() + "\n")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.worker_proc")
    parser.add_argument("side", choices=["runnel", "plain"])
    actions = ["drain", "count", "takeover", "send", "latency", "produce"]
    parser.add_argument("action", choices=actions)
    parser.add_argument("--url", required=True)
    parser.add_argument("--stream", required=True)
    parser.add_argument("--group", default="g")
    parser.add_argument("--batch", type=int, default=1, help="take(n), COUNT, or send size")
    parser.add_argument("--events", type=int, default=0, help="events to send")
    parser.add_argument("--rate", type=int, default=5000, help="events/s to produce")
    parser.add_argument("--per-tick", type=int, default=25, help="events per send")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to produce")
    parser.add_argument("--warmup", type=int, default=0, help="first events not measured")
    parser.add_argument("--window", type=float, help="count: per tumbling window (s)")
    parser.add_argument("--metrics-port", type=int, help="runnel drain: serve metrics here")
    parser.add_argument(
        "--tracing", choices=["absent", "idle", "on"], help="runnel drain: runnel-otel's state"
    )
    parser.add_argument(
        "--gated", action="store_true", help="drain: process nothing before SIGUSR1"
    )
    parser.add_argument("--defaults", action="store_true", help="runnel drain: default join delay")
    parser.add_argument("--prefetch", type=int, help="runnel drain: default_prefetch_count")
    parser.add_argument(
        "--no-identities", action="store_true", help="runnel send: idempotent_sends=False"
    )
    parser.add_argument(
        "--both", action="store_true", help="runnel send: with and without identities in turn"
    )
    a = parser.parse_args()
    if a.tracing:
        runnel_side.tracing(a.tracing)
    side = runnel_side if a.side == "runnel" else plain_side
    if a.action == "drain" and a.side == "runnel" and (a.gated or a.defaults or a.prefetch):
        job = runnel_side.drain(
            a.url,
            a.stream,
            a.group,
            a.batch,
            gated=a.gated,
            defaults=a.defaults,
            prefetch=a.prefetch,
        )
    elif a.action == "drain" and a.gated:
        job = plain_side.drain(a.url, a.stream, a.group, a.batch, lambda: emit({"ready": True}))
    elif a.action == "drain" and a.metrics_port:
        job = runnel_side.drain(a.url, a.stream, a.group, a.batch, metrics_port=a.metrics_port)
    elif a.action == "drain":
        job = side.drain(a.url, a.stream, a.group, a.batch)
    elif a.action == "count" and a.window:
        job = side.count(a.url, a.stream, a.group, a.batch, window=a.window)
    elif a.action == "count":
        job = side.count(a.url, a.stream, a.group, a.batch)
    elif a.action == "takeover":
        job = runnel_side.takeover(a.url, a.stream, a.group)
    elif a.action == "send" and a.both:
        job = runnel_side.send_both(a.url, a.stream, a.events, a.batch)
    elif a.action == "send" and a.no_identities:
        job = runnel_side.send(a.url, a.stream, a.events, a.batch, identities=False)
    elif a.action == "send":
        job = side.send(a.url, a.stream, a.events, a.batch)
    elif a.action == "latency":
        job = side.latency(a.url, a.stream, a.group, a.warmup, lambda: emit({"ready": True}))
    else:
        job = side.produce(a.url, a.stream, a.rate, a.per_tick, a.seconds)
    emit(asyncio.run(job))


if __name__ == "__main__":
    main()
