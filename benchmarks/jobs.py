"""The job queue against arq and saq: enqueue rate, execution rate (from the first job
run, and from the worker process's launch), latency; a workflow (group and chord)
against Celery (benchmarks/chord.py); and ``runnel worker --processes 2`` against one
process, for jobs and for a stream drain.

``python -m benchmarks jobs [--events N] [--rounds R]``; with ``--processes N``, only
``runnel worker --processes N`` against ``--processes 1`` on jobs (``processes_run``).

Every side runs in fresh processes of its own (benchmarks/jobs_side.py) against the same
private redis-server, emptied between runs: no-op ``async`` jobs, one worker process,
concurrency 50, results kept. The execution rate is timed by the job function, from the
first job run to the last; "from the worker's start" counts from the worker process's
launch instead (interpreter, imports, connecting, then the whole backlog). arq, saq and
Celery run from virtual environments made on first use under ``.bench/venvs/``, with the
exact versions of ``lock/bench-<peer>.txt`` (benchmarks/peers.py). Rounds
alternate the sides, so a slow spell of the machine hits all alike; the best of each is
compared.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import redis

from benchmarks import chord, harness
from benchmarks.common import APP, ROOT, Row, rate, spread, stream_keys
from benchmarks.peers import PEERS

SIDE = ROOT / "benchmarks" / "jobs_side.py"
VENVS = ROOT / ".bench" / "venvs"
CONCURRENCY = 50
TARGET = 5.0
LATENCY_RATE = 1000
LATENCY_SECONDS = 10.0


def python_for(side: str) -> str:
    """The interpreter a side runs in: this one for Runnel, a private venv for a peer."""
    if side == "runnel":
        return sys.executable
    venv = VENVS / side
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    lock = ROOT / "lock" / f"bench-{side}.txt"
    wanted = " ".join(PEERS[side]) + "\n" + lock.read_text()
    if not marker.exists() or marker.read_text() != wanted:
        print(f"  making {venv} ({' '.join(PEERS[side])}, {lock.name})", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "-c",
                str(lock),
                *PEERS[side],
            ],
            # This environment's own lock must not reach the peer's pip.
            env={k: v for k, v in os.environ.items() if k != "PIP_CONSTRAINT"},
            check=True,
        )
        marker.write_text(wanted)
    return str(python)


def side_env() -> dict[str, str]:
    """The sides' environment, with Python's default bytecode caching: pip compiled the
    peers' modules when it installed them, and a Runnel installed from the index is
    compiled too, so none may pay for compiling its modules on every start (the
    checkout's editable install is not compiled, and PYTHONDONTWRITEBYTECODE may be set)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_runnel() -> None:
    """Import, once, what a jobs worker and a client import, writing their bytecode."""
    warm = "import runnel.runtime.worker, runnel_redis.transport, runnel.plugins.manager as m"
    subprocess.run([sys.executable, "-c", f"{warm}; m.registry()"], env=side_env(), check=True)


def side(name: str, action: str, url: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [python_for(name), str(SIDE), name, action, "--url", url, *extra],
        cwd=ROOT,
        env=side_env(),
        stdout=subprocess.PIPE,
        text=True,
    )


def result(proc: subprocess.Popen[str], timeout: float = 600) -> dict[str, Any]:
    assert proc.stdout is not None
    out, _ = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{proc.args} exited with {proc.returncode}: {out[-500:]}")
    return orjson.loads(lines[-1])


def flush(url: str) -> None:
    """Empty the private benchmark server (it holds nothing else)."""
    client = redis.Redis.from_url(url)
    client.flushall()
    client.close()


def enqueue_and_work(url: str, name: str, jobs: int) -> dict[str, Any]:
    flush(url)
    n = ["--jobs", str(jobs), "--concurrency", str(CONCURRENCY)]
    enqueued = result(side(name, "enqueue", url, *n))
    cpu = harness.RedisCpu(url)
    launched = time.monotonic()  # the same clock as the side's (CLOCK_MONOTONIC)
    worked = result(side(name, "work", url, *n))
    worked["redis_cpu"] = cpu.share()
    worked["startup"] = worked["first"] - launched
    # From the worker's start: process launch (interpreter, imports, connecting) to the
    # last job done.
    from_start = worked["jobs"] / (worked["last"] - launched)
    return {
        **worked,
        "enqueue": enqueued["rate"],
        "work": worked["rate"],
        "from_start": from_start,
    }


def latency(url: str, name: str) -> dict[str, Any]:
    flush(url)
    total = int(LATENCY_RATE * LATENCY_SECONDS) + 1
    worker = side(name, "latency", url, "--jobs", str(total), "--concurrency", str(CONCURRENCY))
    assert worker.stdout is not None
    if orjson.loads(worker.stdout.readline()) != {"ready": True}:
        raise RuntimeError(f"{name} latency worker did not start")
    time.sleep(1.0)  # let it connect and block on the queue
    result(
        side(name, "produce", url, "--rate", str(LATENCY_RATE), "--seconds", str(LATENCY_SECONDS))
    )
    return result(worker)


def run(url: str, events: int | None = None, rounds: int = 3, **_: Any) -> list[Row]:
    jobs = events or 20_000
    sides = ["runnel", "arq", "saq"]
    for name in sides:
        python_for(name)
    compile_runnel()
    print(
        f"jobs: {jobs:,} no-op async jobs, enqueued {CONCURRENCY} at a time, then run by one "
        f"worker process of concurrency {CONCURRENCY} (results kept); best of {rounds}",
        flush=True,
    )
    got: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for n in range(rounds):
        for name in sides:
            r = enqueue_and_work(url, name, jobs)
            got[name].append(r)
            print(
                f"  round {n + 1} {name}: enqueue {r['enqueue'] / 1000:,.2f}k/s, "
                f"execute {r['work'] / 1000:,.2f}k/s (worker CPU {r['cpu']:.0%}, "
                f"redis-server {r['redis_cpu']:.0%}), from the worker's start "
                f"{r['from_start'] / 1000:,.2f}k/s (first job {r['startup'] * 1000:,.0f} ms "
                "after launch)",
                flush=True,
            )
    rows = []
    for what, label in (
        ("enqueue", f"jobs enqueued, {CONCURRENCY} at a time"),
        ("work", "jobs executed, concurrency 50"),
        ("from_start", "jobs executed from the worker's start"),
    ):
        best = {name: max(r[what] for r in got[name]) for name in sides}
        spreads = {name: spread([r[what] for r in got[name]]) for name in sides}
        for peer in ("arq", "saq"):
            ratio = best["runnel"] / best[peer]
            rows.append(
                Row(
                    f"{label} (vs {peer})",
                    rate(best["runnel"]),
                    rate(best[peer]),
                    f"{ratio:.2f}",
                    f">= {TARGET:g}",
                    ratio >= TARGET,
                    spread=f"{spreads['runnel']}/{spreads[peer]}",
                )
            )
    print(f"latency: {LATENCY_RATE} jobs/s for {LATENCY_SECONDS:g}s, enqueue to start", flush=True)
    lat = {}
    for name in sides:
        lat[name] = latency(url, name)
        r = lat[name]
        print(
            f"  {name}: p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
            f"max {r['max_ms']:.1f} ms",
            flush=True,
        )
    r = lat["runnel"]
    rows.append(
        Row(
            f"p50 enqueue-to-start at {LATENCY_RATE}/s (vs saq)",
            f"{r['p50_ms']:.2f} ms",
            f"{lat['saq']['p50_ms']:.2f} ms",
            target="< 2 ms",
            met=r["p50_ms"] < 2.0,
        )
    )
    rows.append(
        Row(
            f"p99 enqueue-to-start at {LATENCY_RATE}/s (vs saq)",
            f"{r['p99_ms']:.2f} ms",
            f"{lat['saq']['p99_ms']:.2f} ms",
        )
    )
    rows += chord.run(url, rounds, CONCURRENCY, TARGET)
    flush(url)
    from benchmarks import jobs_baseline  # imports this module

    rows += jobs_baseline.run(url, events=jobs, rounds=rounds)
    return rows


# runnel worker --processes N: jobs and a stream drain, through the real command line.

PROCESSES_APP = ROOT / "benchmarks" / "processes_app.py"


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(p) for p in text]
    return found


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def supervised(url: str, what: str, processes: int, total: int) -> dict[str, Any]:
    """Drain a backlog of ``total`` jobs or events with ``runnel worker --processes N``;
    the rate from the first item done to the last, and each process's share of a core."""
    env = {**os.environ, "RUNNEL_REDIS_URL": url, "RUNNEL_LOG_LEVEL": "warning", "BENCH_WHAT": what}
    env["PYTHONPATH"] = str(ROOT)
    args = (
        ["--no-jobs"]
        if what == "stream"
        else ["--no-processors", "--concurrency", str(CONCURRENCY)]
    )
    command = [
        sys.executable,
        "-m",
        "runnel",
        "worker",
        "benchmarks.processes_app:app",
        "--processes",
        str(processes),
        *args,
    ]
    client = redis.Redis.from_url(url)
    remaining = _remaining(client, what)
    proc = subprocess.Popen(command, cwd=ROOT, env=env)
    try:
        started = finished = None
        deadline = time.monotonic() + 600
        pids: list[int] = []
        before: dict[int, float] = {}
        redis_cpu = None
        while time.monotonic() < deadline:
            left = remaining()
            now = time.monotonic()
            if started is None and left < total:
                started = now
                redis_cpu = harness.RedisCpu(url)
                # With one process there is no supervisor: the worker is the process itself.
                pids = children(proc.pid) if processes > 1 else [proc.pid]
                before = {p: cpu_seconds(p) for p in pids}
            if left == 0:
                finished = now
                break
            time.sleep(0.02)
        if started is None or finished is None or redis_cpu is None:
            raise RuntimeError(f"{what} not drained by {processes} processes")
        shares = [(cpu_seconds(p) - before[p]) / (finished - started) for p in pids]
        server = redis_cpu.share()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        client.close()
    return {"rate": total / (finished - started), "cpu": shares, "redis_cpu": server}


def _remaining(client: redis.Redis, what: str) -> Any:
    if what == "jobs":
        from runnel_redis import keys

        queue = keys.job_queue(APP)
        return lambda: client.xlen(queue)
    from benchmarks.processes_app import STREAM

    streams = stream_keys(STREAM)

    def left() -> int:
        pipe = client.pipeline(transaction=False)
        for key in streams:
            pipe.xinfo_groups(key)
        total = 0
        for key, groups in zip(streams, pipe.execute(), strict=True):
            group = [g for g in groups if g["name"] == b"drain"]
            if not group:
                total += client.xlen(key)
            else:
                lag = group[0].get("lag")
                total += (lag if lag is not None else client.xlen(key)) + group[0]["pending"]
        return total

    return left


def processes_run(
    url: str,
    events: int | None = None,
    rounds: int = 3,
    processes: int = 2,
    kinds: tuple[str, ...] = ("jobs", "stream"),
    **_: Any,
) -> list[Row]:
    """``runnel worker --processes N`` against ``--processes 1`` on the same backlog, in
    turns; the speed-up of the best runs, with the share of a core each process and
    redis-server used in them."""
    from benchmarks.processes_app import fill_jobs, fill_stream

    jobs = events or 40_000
    sizes = {"jobs": jobs, "stream": 10 * jobs}
    fills = {"jobs": fill_jobs, "stream": fill_stream}
    what_ran = ", ".join(
        f"{sizes[k]:,} jobs (concurrency {CONCURRENCY})"
        if k == "jobs"
        else f"{sizes[k]:,} stream events"
        for k in kinds
    )
    print(
        f"processes: runnel worker --processes 1 and {processes}: {what_ran}; best of {rounds}",
        flush=True,
    )
    got: dict[str, list[dict[str, Any]]] = {}
    for n in range(rounds):
        for what in kinds:
            for count in (1, processes):
                flush(url)
                fills[what](url, sizes[what])
                r = supervised(url, what, count, sizes[what])
                got.setdefault(f"{what} x{count}", []).append(r)
                print(
                    f"  round {n + 1} {what} x{count}: {r['rate'] / 1000:,.1f}k/s, CPU: "
                    f"{shares(r)}",
                    flush=True,
                )
    rows = []
    for what in kinds:
        ones, many = got[f"{what} x1"], got[f"{what} x{processes}"]
        one = max(ones, key=lambda r: r["rate"])
        best = max(many, key=lambda r: r["rate"])
        print(
            f"{what}: speed-up of --processes {processes} over 1: "
            f"{best['rate'] / one['rate']:.2f}x ({rate(best['rate'])} against "
            f"{rate(one['rate'])}); CPU, 1 process: {shares(one)}; {processes} processes: "
            f"{shares(best)}",
            flush=True,
        )
        rows.append(
            Row(
                f"{what}: --processes {processes} vs 1",
                rate(best["rate"]),
                rate(one["rate"]),
                f"{best['rate'] / one['rate']:.2f}",
                spread=f"{spread([r['rate'] for r in many])}/{spread([r['rate'] for r in ones])}",
            )
        )
    flush(url)
    return rows


def shares(r: dict[str, Any]) -> str:
    """Each worker process's share of a core, and redis-server's."""
    cpu = " + ".join(f"{s:.0%}" for s in r["cpu"])
    return f"processes {cpu}, redis-server {r['redis_cpu']:.0%} (of one core each)"
