"""A workflow end to end against Celery: a group of 1,000 no-op jobs with a chord callback,
from the enqueue call to the callback's result (part of ``python -m benchmarks jobs``).

Each round, each side in turn: the private redis-server is emptied, one worker process is
started through the library's own command line with 50 slots, and a client process
(benchmarks/chord_side.py) runs one no-op job to know the worker is up, then times one
``chord(group(noop.s() x 1000), done.s()).delay()`` and waits for its result. The
worker's start-up is not counted. Then the worker is killed.

* Runnel: ``runnel worker benchmarks.chord_side:runnel_app --no-processors
  --concurrency 50``.
* Celery 5.7.0, Redis broker and Redis result backend on the same server:
  ``celery -A chord_side:celery_app worker --pool threads --concurrency 50``. No-op jobs
  wait on nothing but Redis, so a user would pick a pool of threads or greenlets, not 50
  forked processes on two cores; threads were the faster here (gevent, 50 greenlets:
  16.5 to 26.9 s a workflow against 6.1 to 9.5 s, load average 8.5, 2026-11-26).

Until Runnel has workflows (``from runnel import chord, group``) its rounds are skipped
and the row says so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from typing import Any

from benchmarks.common import ROOT, Row

WORKFLOW_JOBS = 1000
SIDE = ROOT / "benchmarks" / "chord_side.py"
SKIPPED = "workflows not available"


def available() -> bool:
    try:
        from runnel import chord, group  # noqa: F401
    except ImportError:
        return False
    return True


def worker_command(name: str, python: str, concurrency: int) -> list[str]:
    slots = ["--concurrency", str(concurrency)]
    if name == "runnel":
        target = "benchmarks.chord_side:runnel_app"
        return [python, "-m", "runnel", "worker", target, "--no-processors", *slots]
    celery = os.path.join(os.path.dirname(python), "celery")
    app = "chord_side:celery_app"
    return [celery, "-A", app, "worker", "--pool", "threads", *slots, "--loglevel", "warning"]


def one(url: str, name: str, python: str, concurrency: int) -> dict[str, Any]:
    """One timed workflow on a fresh worker process; its seconds."""
    from benchmarks.jobs import flush, result, side_env

    flush(url)
    env = {**side_env(), "BENCH_URL": url, "RUNNEL_LOG_LEVEL": "warning"}
    env["PYTHONPATH"] = str(ROOT if name == "runnel" else ROOT / "benchmarks")
    log = tempfile.TemporaryFile("w+")  # shown only if the round fails
    worker = subprocess.Popen(
        worker_command(name, python, concurrency),
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,  # its own group: a pool's children, if any, go with it
    )
    try:
        client = subprocess.Popen(
            [python, str(SIDE), name, "client", "--url", url, "--jobs", str(WORKFLOW_JOBS)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        got = result(client)
    except BaseException:
        log.seek(0)
        print(f"{name} worker's output:\n{log.read()[-3000:]}", file=sys.stderr)
        raise
    finally:
        os.killpg(worker.pid, signal.SIGKILL)  # how a worker stops is not measured
        worker.wait(60)
        log.close()
    if "skipped" not in got and got.get("result") != WORKFLOW_JOBS:
        raise RuntimeError(f"{name}: the callback returned {got.get('result')!r}")
    return got


def run(url: str, rounds: int, concurrency: int, target: float) -> list[Row]:
    from benchmarks.jobs import python_for

    sides = ["runnel", "celery"] if available() else ["celery"]
    pythons = {name: python_for(name) for name in sides}
    print(
        f"workflow: a group of {WORKFLOW_JOBS:,} no-op jobs and a chord callback, enqueue to "
        f"the callback's result, one worker process of concurrency {concurrency} (started "
        f"and ready before timing); best of {rounds}",
        flush=True,
    )
    if "runnel" not in sides:
        print(f"  runnel: {SKIPPED} (runnel.chord cannot be imported): skipped", flush=True)
    got: dict[str, list[float]] = {name: [] for name in sides}
    for n in range(rounds):
        for name in sides:
            r = one(url, name, pythons[name], concurrency)
            if "skipped" in r:
                raise RuntimeError(f"{name}: {r['skipped']}")
            got[name].append(r["seconds"])
            print(f"  round {n + 1} {name}: {r['seconds'] * 1000:,.0f} ms", flush=True)
    figure = f"group of {WORKFLOW_JOBS:,} + chord callback, end to end (vs celery)"
    celery = min(got["celery"])
    if "runnel" not in got:
        return [Row(figure, SKIPPED, f"{celery * 1000:,.0f} ms", "", f">= {target:g}")]
    runnel = min(got["runnel"])
    ratio = celery / runnel
    return [
        Row(
            figure,
            f"{runnel * 1000:,.0f} ms",
            f"{celery * 1000:,.0f} ms",
            f"{ratio:.2f}",
            f">= {target:g}",
            ratio >= target,
            spread=f"{shortfall(got['runnel'])}/{shortfall(got['celery'])}",
        )
    ]


def shortfall(seconds: list[float]) -> str:
    """Like common.spread, for times: how far the slowest run fell below the fastest."""
    return f"{1 - min(seconds) / max(seconds):.0%}" if len(seconds) > 1 else "-"
