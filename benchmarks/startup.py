"""``python -m benchmarks startup [--rounds N]``: how soon the command line answers.

Each figure is the median (and the fastest) of N runs of a fresh process:

- ``runnel --help``: the whole process, from its start to its exit.
- a worker's first event: from starting ``runnel worker`` to its processor printing the
  first event, which was sent before the start (a private redis-server, one stream of one
  partition, the only worker of its app). With ``RUNNEL_DEFAULT_JOIN_DELAY=0``, the
  process's own start-up; then with the default ``join_delay`` (2 s), which a worker
  alone does not wait.
- the first again with no bytecode cache: every module compiled from its source at the
  start, as on a machine where ``PYTHONDONTWRITEBYTECODE`` is set and nothing was
  compiled before (this checkout's editable install is not compiled on install).

The others run with Python's bytecode caching on, in a cache of their own
(``PYTHONPYCACHEPREFIX``, filled by a first run that is not counted), as an installed
Runnel runs: pip compiles what it installs.

Each also as CPU time (user + system, of the process to its exit; the worker is stopped
at its first event), which other work on a shared machine skews far less than the wall
clock. Not asserted by any test (the time depends on the machine and its load): read it beside
``python -X importtime -m runnel --help``, which names what is imported and for how long.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.common import server

RUNNEL = [sys.executable, "-m", "runnel"]
APP = """
import os

from runnel import App, Record

app = App(name=os.environ["STARTUP_APP"])


class Ping(Record):
    key: str


pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)


@app.processor(pings)
async def first(events):
    async for ping in events.records():
        print("first event", ping.key, flush=True)
"""


Runs = tuple[list[float], list[float]]
"""Wall-clock seconds and CPU seconds of each run."""


def summary(name: str, runs: Runs) -> str:
    wall, cpu = (sorted(x * 1000 for x in values) for values in runs)
    return (
        f"{name:<30} wall median {statistics.median(wall):6.0f} ms  fastest {wall[0]:6.0f} ms"
        f"   CPU median {statistics.median(cpu):6.0f} ms  least {cpu[0]:6.0f} ms"
    )


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def python_env(cache: Path, write: bool = True) -> dict[str, str]:
    """The environment of a run: bytecode cached in ``cache``; or, not ``write``, never
    cached (``cache`` is then a directory that stays empty)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def help_runs(rounds: int, env: dict[str, str]) -> Runs:
    wall, cpu = [], []
    subprocess.run([*RUNNEL, "--help"], env=env, capture_output=True, check=True)  # warm-up
    for _ in range(rounds):
        started, before = time.perf_counter(), children_cpu()
        subprocess.run([*RUNNEL, "--help"], env=env, capture_output=True, check=True)
        wall.append(time.perf_counter() - started)
        cpu.append(children_cpu() - before)
    return wall, cpu


def worker_runs(url: str, rounds: int, base: dict[str, str], join_delay: str | None) -> Runs:
    """``rounds`` timed runs after one untimed (which fills the bytecode cache, if any)."""
    directory = Path(tempfile.mkdtemp(prefix="runnel-startup-"))
    (directory / "startupapp.py").write_text(APP)
    wall, cpu = [], []
    try:
        for n in range(rounds + 1):
            env = {
                **base,
                "RUNNEL_REDIS_URL": url,
                "STARTUP_APP": f"startup{uuid.uuid4().hex[:8]}",  # alone in its app
                "PYTHONUNBUFFERED": "1",
            }
            env.pop("RUNNEL_DEFAULT_JOIN_DELAY", None)
            if join_delay is not None:
                env["RUNNEL_DEFAULT_JOIN_DELAY"] = join_delay
            sent = [*RUNNEL, "send", "startupapp:pings", '{"key": "k"}']
            subprocess.run(sent, cwd=directory, env=env, capture_output=True, check=True)
            started, before = time.perf_counter(), children_cpu()
            worker = subprocess.Popen(
                [*RUNNEL, "worker", "startupapp:app"],
                cwd=directory,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert worker.stdout is not None
            for line in worker.stdout:
                if line.startswith("first event"):
                    took = time.perf_counter() - started
                    break
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
            if n:  # the first run is the warm-up
                wall.append(took)
                cpu.append(children_cpu() - before)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return wall, cpu


def run(rounds: int = 10) -> None:
    cache = Path(tempfile.mkdtemp(prefix="runnel-startup-pycache-"))
    cached = python_env(cache)
    try:
        print(summary("runnel --help", help_runs(rounds, cached)), flush=True)
        with server() as url:
            for name, env, delay in (
                ("worker, join_delay 0", cached, "0"),
                ("worker, default join_delay", cached, None),
                ("worker, join_delay 0, no pyc", python_env(cache / "none", False), "0"),
            ):
                print(summary(name, worker_runs(url, rounds, env, delay)), flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    print("load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
