"""``python -m benchmarks [throughput|latency|memory|scaling|jobs|processes|limits|metrics|
tracing|state|codecs|profile|spark|cluster|startup] [case] [--events N] [--rounds N]
[--processes N]``

Without a name, the whole suite (throughput, latency, memory, scaling) against one private
redis-server, then one table: every figure next to a plain redis-py loop doing the same
work in the same run, their ratio, and the target. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import platform
from typing import Any

import redis

from benchmarks import (
    jobs,
    jobs_baseline,
    latency,
    memory,
    metrics,
    scaling,
    state,
    throughput,
    tracing,
)
from benchmarks.common import Row, git_state, server, table

SUITE = {
    "throughput": throughput.run,
    "latency": latency.run,
    "memory": memory.run,
    "scaling": scaling.run,
}
OTHERS = {
    "jobs": (jobs.run, "arq or saq"),
    "processes": (jobs.processes_run, "--processes 1"),
    "limits": (jobs_baseline.run, "the baseline ref"),
    "state": (state.run, "a redis-py loop"),
    "metrics": (metrics.run, "metrics off"),
    "tracing": (tracing.run, "runnel-otel absent"),
}
"""Run on their own, each with its own baseline: the job queue's peers (arq, saq), one
worker process against two, no-op jobs against a baseline git ref (limits unused), or
metrics on against off, or tracing on against absent."""


CASES = {("profile", "records"), ("profile", "take"), ("memory", "identities")}
"""The cases a benchmark name takes."""


def header(url: str) -> str:
    client = redis.Redis.from_url(url)
    version = client.info("server")["redis_version"]
    client.close()
    return (
        f"{datetime.datetime.now():%Y-%m-%d %H:%M}, {git_state()}, Python "
        f"{platform.python_version()}, Redis {version}, {os.cpu_count()} cores, {load()}"
    )


def load() -> str:
    """Other work on the machine skews every figure: say how busy it was."""
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "which",
        nargs="?",
        choices=[*SUITE, *OTHERS, "codecs", "profile", "spark", "cluster", "startup"],
    )
    parser.add_argument(
        "case", nargs="?", help="profile: records or take; memory: identities (that alone)"
    )
    parser.add_argument("--events", type=int, help="backlog or events (each has a default)")
    parser.add_argument(
        "--rounds", type=int, help="runs per throughput figure (3), or per start-up figure (10)"
    )
    parser.add_argument(
        "--processes",
        type=int,
        help="jobs: runnel worker --processes N against 1 (no peers); processes: N (2)",
    )
    args = parser.parse_args()
    if args.processes is not None and args.which not in ("jobs", "processes"):
        parser.error("--processes goes with jobs or processes")
    if args.processes is not None and args.processes < 2:
        parser.error("--processes must be 2 or more")
    if args.case is not None and (args.which, args.case) not in CASES:
        parser.error(f"no case {args.case!r} of {args.which or 'the suite'}")
    if args.which == "startup":  # fresh processes of the command line (benchmarks/startup.py)
        from benchmarks import startup

        startup.run(args.rounds or 10)
        return
    if args.which == "codecs":
        from benchmarks import codecs

        codecs.run([str(args.events)] if args.events else [])
        return
    if args.which == "spark":  # its own server and Spark session (benchmarks/spark.py)
        from benchmarks import spark

        spark.main(args.events or 1_000_000)
        return
    if args.which == "cluster":  # its own redis-server and cluster (benchmarks/cluster.py)
        from benchmarks import cluster

        cluster.run(args.events or 20_000)
        return
    if args.which == "profile":
        from benchmarks import profiling

        profiling.run(args.case or "records", args.events)
        return
    chosen, baseline = choose(args.which, args.processes)
    if args.case == "identities":
        chosen = {"identities": memory.identities}
    rows: list[Row] = []
    with server() as url:
        print(header(url), flush=True)
        for run in chosen.values():
            # --events is each benchmark's own size; for the whole suite, throughput's.
            events = args.events if args.which or run is throughput.run else None
            rows += run(url, events=events, rounds=args.rounds or 3)
        print()
        print(table(rows, baseline))
        print(f"\n{load()} (1, 5, 15 min)")


def choose(which: str | None, processes: int | None) -> tuple[dict[str, Any], str]:
    """The benchmarks to run in one redis-server, and what their ratios are against."""
    if processes is not None:  # jobs --processes N: jobs only; processes: both
        kinds = ("jobs",) if which == "jobs" else ("jobs", "stream")
        run = functools.partial(jobs.processes_run, processes=processes, kinds=kinds)
        return {"processes": run}, "--processes 1"
    if which in OTHERS:
        return {which: OTHERS[which][0]}, OTHERS[which][1]
    return ({which: SUITE[which]} if which else dict(SUITE)), "plain redis-py"


if __name__ == "__main__":
    main()
