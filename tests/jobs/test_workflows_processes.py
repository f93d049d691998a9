"""A chord across real worker processes: its callback runs exactly once, with every
member's result, while one worker is killed (SIGKILL) and another frozen (SIGSTOP) past
its heartbeat, so that members run twice and late outcomes come back.

The app module (``flowapp.py`` in ``tmp_path``) records every member try it begins in
Redis (``ran``) and every callback run, from inside the callback itself (``callback``).
Only ``redis_url`` says where Redis is, so tests/redis_cluster/ runs this test again on a
Redis Cluster. No assertion is made on how long anything took.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

from runnel.jobs import WorkflowStatus
from tests.support.processes import WorkerProcess, env_with, wait_for
from tests.support.worker_cluster import client_for, is_stopped, pause

MODULE = "flowapp"
MEMBERS = 200
HANG = 120
"""Hang guard (seconds) of every wait."""

APP_SOURCE = """
import asyncio
import json
import os

from runnel import App

app = App(
    name={app_name!r},
    redis_url={redis_url!r},
    default_grace_period=2,
    job_heartbeat_timeout=2,
    job_backoff_base=0.05,
    job_concurrency=4,
)


@app.job(retries=5)
async def member(n: int) -> int:
    await app.redis.rpush("ran", f"{{n}}:{{os.getpid()}}")
    await asyncio.sleep(0.1)
    return n * n


@app.job(retries=5)
async def collect(results: list[int]) -> int:
    await app.redis.rpush("callback", json.dumps(results))
    return sum(results)
"""


def load(directory: Path, app_name: str) -> Any:
    name = f"{MODULE}_{app_name}"
    spec = importlib.util.spec_from_file_location(name, directory / f"{MODULE}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_a_chord_callback_runs_once_through_kill_9_and_sigstop(
    tmp_path: Path, app_name: str, redis_url: str
) -> None:
    (tmp_path / f"{MODULE}.py").write_text(
        textwrap.dedent(APP_SOURCE.format(app_name=app_name, redis_url=redis_url))
    )
    module = load(tmp_path, app_name)
    client = client_for(redis_url)
    env = env_with(redis_url)
    workers = [WorkerProcess(f"{MODULE}:app", tmp_path, env, "--no-processors") for _ in range(3)]
    try:
        app = module.app

        async def send() -> str:
            from runnel import chord, group

            try:
                wf = chord(group(module.member.s(n) for n in range(MEMBERS)), module.collect.s())
                return (await wf.delay()).id
            finally:
                await app.aclose()

        flow_id = asyncio.run(send())
        wait_for(lambda: client.llen("ran") >= 20, HANG)
        workers[0].kill()  # kill -9, members in hand
        wait_for(lambda: client.llen("ran") >= 60, HANG)
        pause(workers[1])  # frozen past its heartbeat: its members run again elsewhere
        assert is_stopped(workers[1].proc.pid)
        wait_for(lambda: client.llen("callback") >= 1, HANG)
        workers[1].signal(signal.SIGCONT)  # its late outcomes come back, and are refused

        async def outcome() -> tuple[Any, Any, list[Any]]:
            try:
                handle = app.workflow_result(flow_id)
                return await handle.get(timeout=HANG), await handle.status(), await handle.members()
            finally:
                await app.aclose()

        value, status, members = asyncio.run(outcome())
        for w in workers[1:]:
            assert w.stop() == 0, w.output
        expected = [n * n for n in range(MEMBERS)]
        calls = [json.loads(raw) for raw in client.lrange("callback", 0, -1)]
        assert calls == [expected]  # once, with every member's result in member order
        assert (value, status) == (sum(expected), WorkflowStatus.COMPLETE)
        assert len(members) == MEMBERS + 1
        assert {s for _, _, s in members} == {"SUCCESS"}
        ran = {int(raw.split(b":")[0]) for raw in client.lrange("ran", 0, -1)}
        assert ran == set(range(MEMBERS))
    finally:
        for w in workers:
            with contextlib.suppress(ProcessLookupError):
                w.signal(signal.SIGCONT)
            w.__exit__(None, None, None)
