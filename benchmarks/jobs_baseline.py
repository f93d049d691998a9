"""No-op job throughput with limits unused: this tree against a baseline git ref.

``python -m benchmarks limits [--events N] [--rounds R]`` (also a row of ``jobs``)

Jobs declared without ``rate_limit`` or ``concurrency_limit`` must run exactly as before
limits existed: no extra round trip, no extra work in the scripts. The same Runnel side
as ``jobs`` (benchmarks/jobs_side.py: no-op ``async`` jobs, one worker process,
concurrency 50, results kept) runs twice per round against the same private
redis-server, emptied between runs: once with this tree's packages, once with the
baseline's, each in fresh processes whose ``PYTHONPATH`` starts with that tree's
``packages/*/src``. The baseline is ``$RUNNEL_BENCH_BASELINE`` if set (any git ref), else
the commit this branch started from (``git merge-base HEAD main``), unpacked with
``git archive`` into a temporary directory. Rounds alternate the two, each side first in
every other round; the best of each
is compared, and so is the median CPU time the worker spent per job (steadier than the
rate when other work shares the machine).
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import harness
from benchmarks.common import ROOT, Row, rate, spread
from benchmarks.jobs import CONCURRENCY, SIDE, flush, result

TARGET = 0.95
"""This tree's throughput over the baseline's: within 5 %."""


def baseline_ref() -> str:
    """The commit to compare with (full hash)."""
    ref = os.environ.get("RUNNEL_BENCH_BASELINE") or _git("merge-base", "HEAD", "main")
    return _git("rev-parse", "--verify", f"{ref}^{{commit}}")


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


@contextlib.contextmanager
def unpacked(commit: str) -> Iterator[Path]:
    """The packages of ``commit`` in a temporary directory (removed afterwards)."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, "packages"], cwd=ROOT, capture_output=True
    )
    if archive.returncode:
        raise RuntimeError(f"git archive {commit}: {archive.stderr.decode().strip()}")
    with tempfile.TemporaryDirectory(prefix="runnel-baseline-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp)


def source_path(tree: Path) -> str:
    """``PYTHONPATH`` that makes a process import the packages of ``tree``."""
    sources = sorted(str(p) for p in (tree / "packages").glob("*/src"))
    return os.pathsep.join([*sources, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)


def run_side(tree: Path, action: str, url: str, jobs: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": source_path(tree)}
    proc = subprocess.Popen(
        [sys.executable, str(SIDE), "runnel", action, "--url", url, "--jobs", str(jobs),
         "--concurrency", str(CONCURRENCY)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    got = result(proc)
    where = Path(got.get("runnel", str(tree / "packages"))).resolve()  # work says which
    if tree.resolve() not in where.parents:
        raise RuntimeError(f"the side meant to run {tree} imported runnel from {where}")
    return got


def measure(url: str, tree: Path, jobs: int) -> dict[str, Any]:
    flush(url)
    run_side(tree, "enqueue", url, jobs)
    cpu = harness.RedisCpu(url)
    worked = run_side(tree, "work", url, jobs)
    worked["redis_cpu"] = cpu.share()
    return worked


def run(url: str, events: int | None = None, rounds: int = 3, **_: Any) -> list[Row]:
    jobs = events or 20_000
    commit = baseline_ref()
    short = commit[:7]
    print(
        f"limits unused: {jobs:,} no-op async jobs run by one worker process of concurrency "
        f"{CONCURRENCY}, no limits declared; this tree against {short}; best of {rounds}",
        flush=True,
    )
    got: dict[str, list[float]] = {"this": [], "base": []}
    cpu: dict[str, list[float]] = {"this": [], "base": []}
    """The worker's CPU per job (us): steadier than the rate on a busy machine."""
    with unpacked(commit) as base:
        for n in range(rounds):
            # Each side first in every other round: neither gains from its position.
            order = [("this", ROOT), ("base", base)]
            for name, tree in order if n % 2 == 0 else order[::-1]:
                r = measure(url, tree, jobs)
                got[name].append(r["rate"])
                cpu[name].append(r["cpu"] / r["rate"] * 1e6)
                print(
                    f"  round {n + 1} {name if name == 'this' else short}: execute "
                    f"{r['rate'] / 1000:,.2f}k/s (worker CPU {r['cpu']:.0%}, "
                    f"{cpu[name][-1]:.1f} us a job; redis-server {r['redis_cpu']:.0%})",
                    flush=True,
                )
    flush(url)
    this, base_best = max(got["this"]), max(got["base"])
    ratio = this / base_best
    this_cpu, base_cpu = statistics.median(cpu["this"]), statistics.median(cpu["base"])
    return [
        Row(
            f"jobs executed, limits unused (vs {short})",
            rate(this),
            rate(base_best),
            f"{ratio:.2f}",
            f">= {TARGET:g}",
            ratio >= TARGET,
            spread=f"{spread(got['this'])}/{spread(got['base'])}",
        ),
        Row(
            f"worker CPU a job, limits unused (vs {short}; median)",
            f"{this_cpu:.1f} us",
            f"{base_cpu:.1f} us",
            f"{this_cpu / base_cpu:.2f}",
        ),
    ]
