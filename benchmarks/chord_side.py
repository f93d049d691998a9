"""One side of the chord benchmark: a group of no-op jobs and a chord callback, Runnel
against Celery (Redis broker and Redis result backend).

``python benchmarks/chord_side.py {runnel,celery} client --url URL [--jobs N]``

The workers are real processes started by the harness (benchmarks/chord.py) through each
library's own command line, loading the apps of this module:

* ``runnel worker benchmarks.chord_side:runnel_app --no-processors --concurrency 50``
* ``celery -A chord_side:celery_app worker --pool gevent --concurrency 50`` (run with
  this directory on the path, from Celery's virtual environment)

Both read the server's URL from ``BENCH_URL``. Like benchmarks/jobs_side.py this file
imports nothing but the standard library at the top, as Celery's environment has neither
Runnel nor this repository installed; the apps are built on first use (PEP 562).

The client first runs one no-op job and waits for its result: that is how it knows the
worker is up, so the worker's start-up is not timed. It then times one workflow, from
building the chord to its callback's result (the number of results it was given), and
prints one JSON line, or ``{"skipped": ...}`` when Runnel has no workflows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

APP = "cbench"
SKIPPED = "workflows not available (runnel.chord cannot be imported)"
_built: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    """``runnel_app`` and ``celery_app``, built once, on the URL in ``BENCH_URL``."""
    makers = {"runnel_app": make_runnel, "celery_app": make_celery}
    if name not in makers:
        raise AttributeError(name)
    if name not in _built:
        _built[name] = makers[name](os.environ["BENCH_URL"])
    return _built[name]


# Runnel.


def make_runnel(url: str) -> Any:
    from runnel import App

    app = App(name=APP, redis_url=url, log_level="warning", default_grace_period=1)

    @app.job
    async def noop() -> None:
        return None

    @app.job
    async def done(results: list[Any]) -> int:
        return len(results)

    return app


async def runnel_client(a: argparse.Namespace) -> dict[str, Any]:
    try:
        from runnel import chord, group
    except ImportError:
        return {"skipped": SKIPPED}
    app = make_runnel(a.url)
    noop, done = app.jobs["noop"], app.jobs["done"]
    warm = await noop.delay()
    await warm.get(timeout=120)  # the worker is up and connected
    start = time.monotonic()
    handle = await chord(group(noop.s() for _ in range(a.jobs)), done.s()).delay()
    got = await handle.get(timeout=600)
    seconds = time.monotonic() - start
    await app.aclose()
    return {"jobs": a.jobs, "seconds": seconds, "result": got}


# Celery.


def make_celery(url: str) -> Any:
    from celery import Celery

    app = Celery(APP, broker=url, backend=url)
    app.conf.update(worker_hijack_root_logger=False, broker_connection_retry_on_startup=True)

    @app.task(name="cbench.noop")
    def noop() -> None:
        return None

    @app.task(name="cbench.done")
    def done(results: list[Any]) -> int:
        return len(results)

    return app


def celery_client(a: argparse.Namespace) -> dict[str, Any]:
    from celery import chord, group

    app = make_celery(a.url)
    noop, done = app.tasks["cbench.noop"], app.tasks["cbench.done"]
    noop.delay().get(timeout=120)  # the worker is up and connected
    start = time.monotonic()
    handle = chord(group(noop.s() for _ in range(a.jobs)), done.s()).delay()
    got = handle.get(timeout=600)
    seconds = time.monotonic() - start
    return {"jobs": a.jobs, "seconds": seconds, "result": got}


def main() -> None:
    parser = argparse.ArgumentParser(prog="chord_side.py")
    parser.add_argument("side", choices=["runnel", "celery"])
    parser.add_argument("action", choices=["client"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, default=1000)
    a = parser.parse_args()
    got = asyncio.run(runnel_client(a)) if a.side == "runnel" else celery_client(a)
    sys.stdout.write(json.dumps(got) + "\n")
    sys.stdout.flush()
    os._exit(0)  # how each client shuts down is not measured


if __name__ == "__main__":
    main()
