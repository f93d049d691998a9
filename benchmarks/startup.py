"""``python -m benchmarks startup [--rounds N]``: how soon the command line answers.

Two figures, each the median (and the fastest) of N runs of a fresh process:

- ``runnel --help``: the whole process, from its start to its exit.
- a worker's first event: from starting ``runnel worker`` to its processor printing the
  first event, which was sent before the start (a private redis-server, one stream of one
  partition, ``RUNNEL_DEFAULT_JOIN_DELAY=0`` so that the figure is the process's own
  start-up, not the join delay a deployment chooses).

Not asserted by any test (the time depends on the machine and its load): read it beside
``python -X importtime -m runnel --help``, which names what is imported and for how long.
"""

from __future__ import annotations

import os
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


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"{name:<28} median {statistics.median(ms):6.0f} ms   fastest {ms[0]:6.0f} ms"


def help_runs(rounds: int) -> list[float]:
    taken = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run([*RUNNEL, "--help"], capture_output=True, check=True)
        taken.append(time.perf_counter() - started)
    return taken


def worker_runs(url: str, rounds: int) -> list[float]:
    directory = Path(tempfile.mkdtemp(prefix="runnel-startup-"))
    (directory / "startupapp.py").write_text(APP)
    taken = []
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
            started = time.perf_counter()
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
                    taken.append(time.perf_counter() - started)
                    break
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return taken


def run(rounds: int = 10) -> None:
    print(summary("runnel --help", help_runs(rounds)), flush=True)
    with server() as url:
        print(summary("worker start to first event", worker_runs(url, rounds)), flush=True)
    print("load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    run(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
