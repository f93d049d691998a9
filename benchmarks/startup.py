"""``python -m benchmarks startup [--rounds N]``: how soon the command line answers.

Two figures, each the median (and the fastest) of N runs of a fresh process:

- ``runnel --help``: the whole process, from its start to its exit.
- a worker's first event: from starting ``runnel worker`` to its processor printing the
  first event, which was sent before the start (a private redis-server, one stream of one
  partition, ``RUNNEL_DEFAULT_JOIN_DELAY=0`` so that the figure is the process's own
  start-up, not the join delay a deployment chooses).

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
        f"{name:<28} wall median {statistics.median(wall):6.0f} ms  fastest {wall[0]:6.0f} ms"
        f"   CPU median {statistics.median(cpu):6.0f} ms  least {cpu[0]:6.0f} ms"
    )


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def help_runs(rounds: int) -> Runs:
    wall, cpu = [], []
    for _ in range(rounds):
        started, before = time.perf_counter(), children_cpu()
        subprocess.run([*RUNNEL, "--help"], capture_output=True, check=True)
        wall.append(time.perf_counter() - started)
        cpu.append(children_cpu() - before)
    return wall, cpu


def worker_runs(url: str, rounds: int) -> Runs:
    directory = Path(tempfile.mkdtemp(prefix="runnel-startup-"))
    (directory / "startupapp.py").write_text(APP)
    wall, cpu = [], []
    try:
        for n in range(rounds):
            env = {
                **os.environ,
                "RUNNEL_REDIS_URL": url,
                "RUNNEL_DEFAULT_JOIN_DELAY": "0",
                "STARTUP_APP": f"startup{n}",
                "PYTHONUNBUFFERED": "1",
            }
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
                    wall.append(time.perf_counter() - started)
                    break
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
            cpu.append(children_cpu() - before)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return wall, cpu


def run(rounds: int = 10) -> None:
    print(summary("runnel --help", help_runs(rounds)), flush=True)
    with server() as url:
        print(summary("worker start to first event", worker_runs(url, rounds)), flush=True)
    print("load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
