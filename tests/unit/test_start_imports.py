"""A jobs-only worker's start imports nothing it does not use: every module imported is
time before the first job runs (benchmarks/jobs.py counts it "from the worker's start")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# A fresh interpreter: this test process has imported everything already.
_CHILD = """
import json, sys
from runnel import App
from runnel.runtime.worker import Worker

app = App(name="starts", redis_url="redis://127.0.0.1:1/0", {settings})

@app.job
async def noop() -> None:
    return None

Worker(app, jobs=True, concurrency=50)
print(json.dumps(sorted(sys.modules)))
"""


def _imported(settings: str = "") -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("RUNNEL_")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(settings=settings)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("module", ["prometheus_client", "croniter", "fastavro"])
def test_a_jobs_worker_without_their_feature_does_not_import(module):
    assert module not in _imported()


def test_a_worker_with_metrics_still_imports_prometheus_client():
    # Constructing the worker builds its metrics (nothing is served before it runs).
    assert "prometheus_client" in _imported("metrics_port=9100")


def test_the_avro_serializer_still_resolves_by_name():
    from runnel.codecs.resolve import resolve_serializer
    from runnel_avro import AvroSerializer

    assert isinstance(resolve_serializer("avro"), AvroSerializer)
    assert isinstance(resolve_serializer("avro+gzip"), AvroSerializer)


def test_an_app_with_a_cron_job_still_checks_its_schedule():
    # croniter is imported when a schedule is read: a bad one still fails at declaration.
    from runnel import App, Misconfigured

    app = App(name="crons", redis_url="redis://127.0.0.1:1/0")
    with pytest.raises(Misconfigured, match="invalid cron expression"):

        @app.job(cron="not a cron")
        async def tick() -> None:
            return None


_STREAMS_CHILD = """
import json, sys
from runnel import App, Record
from runnel.runtime.worker import Worker

app = App(name="streams", redis_url="redis://127.0.0.1:1/0")


class Ping(Record):
    key: str


pings = app.stream("pings", record=Ping, partition_by="key")


@app.processor(pings)
async def first(events):
    pass


Worker(app)
print(json.dumps(sorted(sys.modules)))
"""

JOB_RUNNING = [
    "runnel.jobs.executor",
    "runnel.jobs.function",
    "runnel.jobs.periodic",
    "runnel.jobs.portal",
    "runnel.jobs.result",
    "runnel.jobs.signature",
    "runnel.jobs.workflow",
    "runnel.jobs.model",
    "runnel.jobs.codec",
    "runnel_redis.jobs",
]
"""What declares, enqueues, stores and runs jobs (the Redis store's job role is imported
when an app first uses its job queue, not with the transport)."""


def test_a_worker_of_streams_alone_imports_nothing_that_runs_jobs() -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("RUNNEL_")}
    out = subprocess.run(
        [sys.executable, "-c", _STREAMS_CHILD],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    imported = set(json.loads(out.stdout))
    assert "runnel.processing.executor" in imported  # the worker was built
    assert "runnel_redis.transport" in imported  # with its store
    assert [m for m in JOB_RUNNING if m in imported] == []
    # The settings read RUNNEL_* themselves (runnel.settings.environment).
    assert "pydantic_settings" not in imported


def test_the_jobs_package_still_gives_every_name() -> None:
    import runnel.jobs

    for name in runnel.jobs.__all__:
        assert getattr(runnel.jobs, name) is not None, name
    import runnel.store

    for name in runnel.store.__all__:
        assert getattr(runnel.store, name) is not None, name
