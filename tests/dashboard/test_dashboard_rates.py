"""The dashboard's rates, with real worker processes, a real redis-server and a real
`runnel dashboard`: jobs enqueued and events sent at a steady rate, the rates of every
sample are the counts of its own interval (a rate times its interval is a whole number,
and the intervals' numbers add up to every job and event exactly), never the alternating
0 and twice-the-rate that executors' counts published with their heartbeat (every 3 s
here) gave when sampled every second, and never the undercount that a stream's length
gave once the stream was trimmed to its size."""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runnel.jobs import JobStatus
from runnel.store.backend import admin_of
from tests.support.dashboard import Dashboard, import_file, run_then_close
from tests.support.processes import WorkerProcess, env_with, wait_for

MODULE = "ratesapp"
TARGET = f"{MODULE}:app"
JOBS = 60
EVENTS = 60
EVERY = 1.0
"""Seconds between the dashboard's samples; the workers beat every 3 s (9 / 3)."""

SOURCE = """
from runnel import App, Record

app = App(name={name!r})


class Ping(Record):
    key: str


# A small partition: trimmed over and over while the test sends, so its length stays
# near 10 whatever arrives.
pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1,
                   partition_size=10)


@app.processor(pings)
async def tally(events):
    async for _ in events:
        pass


@app.job(retries=0)
async def work(n: int) -> int:
    return n
"""


@pytest.fixture
def module(
    tmp_path: Path, app_name: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> ModuleType:
    monkeypatch.setenv("RUNNEL_REDIS_URL", redis_url)
    path = tmp_path / f"{MODULE}.py"
    path.write_text(textwrap.dedent(SOURCE.format(name=app_name)))
    return import_file(path, f"{MODULE}_{app_name}")


def get(dashboard: Dashboard, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{dashboard.url}{path}", timeout=30) as answer:
        return dict(json.loads(answer.read()))


def counted(samples: list[dict[str, Any]], rate_of: Any) -> list[int]:
    """Each sample's count (its rate times its interval), checked to be a whole number:
    a rate is a count over the real time between two reads, nothing else. The first
    sample, with no look before it, has none."""
    counts = []
    for s in samples[1:]:
        assert s["interval"] is not None and s["interval"] > 0, s
        rate = rate_of(s)
        assert rate is not None, s
        count = rate * s["interval"]
        assert abs(count - round(count)) < 1e-6, s
        counts.append(round(count))
    return counts


def flowing(samples: list[dict[str, Any]], counts: list[int], ended: list[float]) -> list[int]:
    """The counts of the intervals jobs flowed through: some job ended (by its record's
    own time) in the interval before and in the interval after. Jobs arrive about four
    a second, so each such interval of a second saw some end: a 0 there is the defect."""
    reads = [s["read_at"] for s in samples]

    def ended_in(i: int) -> bool:
        return any(reads[i] < t <= reads[i + 1] for t in ended)

    return [counts[i] for i in range(1, len(counts) - 1) if ended_in(i - 1) and ended_in(i + 1)]


def upto(samples: list[dict[str, Any]], counts: list[int], ended: list[float]) -> None:
    """By each read, no more jobs were counted than had ended (a job's record is stamped
    before its outcome is recorded, and counted only then)."""
    total = 0
    for s, count in zip(samples[1:], counts, strict=True):
        total += count
        # (A record keeps its time to the millisecond.)
        assert total <= sum(t <= s["read_at"] + 0.001 for t in ended), (s, counts)


def test_rates_are_the_counts_of_their_interval_while_jobs_and_events_flow(
    module: ModuleType, tmp_path: Path, redis_url: str
) -> None:
    mod = module
    env = env_with(redis_url, RUNNEL_JOB_HEARTBEAT_TIMEOUT="9")
    with (
        WorkerProcess(TARGET, tmp_path, env, "--concurrency", "4") as one,
        WorkerProcess(TARGET, tmp_path, env, "--concurrency", "4") as two,
    ):
        dashboard = Dashboard(TARGET, tmp_path, env, "--sample-every", str(EVERY))
        try:
            # Two looks of the history and the live sampler before the first job: every
            # job and event then ends in some sample's interval.
            wait_for(lambda: len(get(dashboard, "api/history?span=1h")["samples"]) >= 2)
            wait_for(lambda: len(get(dashboard, "api/state")["throughput"]) >= 2)
            wait_for(lambda: "job executor" in one.output and "job executor" in two.output)

            async def flow() -> list[str]:
                await mod.app.store.log.ensure_group([p.id for p in mod.pings.partitions], "tally")
                ids = []
                for n in range(max(JOBS, EVENTS)):  # about 4 of each a second
                    if n < JOBS:
                        ids.append((await mod.work.delay(n)).id)
                    if n < EVENTS:
                        await mod.pings.send(mod.Ping(key=str(n)))
                    await asyncio.sleep(0.25)
                return ids

            ids = run_then_close(mod, flow)

            async def ended() -> list[float]:
                records = [await mod.app.job_store.job(i) for i in ids]
                return sorted(r.finished for r in records if r is not None and r.finished)

            async def all_done() -> bool:
                statuses = [await mod.app.job_store.status(i) for i in ids]
                backlog = await admin_of(mod.app.store).backlog(
                    [p.id for p in mod.pings.partitions], "tally"
                )
                idle = all(lag == 0 and pending == 0 for lag, pending in backlog.values())
                return idle and all(s is JobStatus.SUCCESS for s in statuses)

            wait_for(lambda: run_then_close(mod, all_done), timeout=120)
            finished = time.time()

            # Two samples read after the last job and event: their counts are in.
            def stored() -> list[dict[str, Any]]:
                return list(get(dashboard, "api/history?span=1h")["samples"])

            wait_for(lambda: sum(s["at"] > finished for s in stored()) >= 2, timeout=60)
            history = stored()
            live = get(dashboard, "api/state")["throughput"]
            finished_at = run_then_close(mod, ended)
        finally:
            dashboard.close()
        assert one.stop() == 0 and two.stop() == 0

    for samples in (history, live):
        jobs = counted(samples, lambda s: s["jobs_per_second"])
        events = counted(samples, lambda s: s["processed"]["tally"])
        # Every job and every event counted once, in the interval it ended in.
        assert sum(jobs) == JOBS, jobs
        assert sum(events) == EVENTS, events
        # While they flow, no interval reads 0; and never more than had ended.
        assert len(finished_at) == JOBS
        upto(samples, jobs, finished_at)
        steady = flowing(samples, jobs, finished_at)
        assert len(steady) >= 3 and all(steady), jobs
        # Events carry no time of their own: between the first interval with some and
        # the last, none reads 0.
        some = [i for i, c in enumerate(events) if c]
        assert len(some) >= 3 and all(events[some[0] : some[-1] + 1]), events
    # Once everything ended, the rates are 0 (the last samples).
    assert history[-1]["jobs_per_second"] == 0 and history[-1]["processed"] == {"tally": 0}
    assert history[-1]["job_failures_per_second"] == 0
    assert "Traceback" not in dashboard.log_path.read_text()
