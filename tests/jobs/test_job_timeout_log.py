"""A job that runs past its timeout: the worker logs one clear line, not asyncio's stack
(the stack is logged at debug level, and kept with the job's error)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.support.processes import WorkerProcess, cli, env_with, wait_for

SOURCE = """
import asyncio

from runnel import App

app = App(name={name!r}, job_backoff_base=0.01, job_backoff_cap=0.05)


@app.job(retries=1, timeout=0.2)
async def slow() -> None:
    await asyncio.sleep(30)
"""


@pytest.mark.parametrize("level", ["info", "debug"])
def test_a_timeout_is_one_log_line(
    tmp_path: Path, app_name: str, redis_url: str, level: str
) -> None:
    (tmp_path / "slowmod.py").write_text(textwrap.dedent(SOURCE.format(name=app_name)))
    env = env_with(redis_url)
    with WorkerProcess("slowmod:app", tmp_path, env, "--log-level", level) as worker:
        sent = cli("jobs", "send", "slowmod:slow", "--wait", "60", cwd=tmp_path, env=env)
        assert sent.returncode == 1, (sent.stdout, sent.stderr, worker.output)
        wait_for(lambda: "giving up" in worker.output)
        assert worker.stop() == 0
    lines = worker.output.splitlines()
    failed = [line for line in lines if " failed (try " in line]
    assert len(failed) == 2, worker.output
    assert failed[0].endswith("retrying in 0.0s: TimeoutError: did not finish within 0.2s")
    assert failed[1].endswith("giving up: TimeoutError: did not finish within 0.2s")
    if level == "info":
        assert "Traceback" not in worker.output, worker.output
    else:
        assert worker.output.count("was stopped at:\nTraceback") == 2, worker.output
    shown = cli("jobs", "info", "slowmod:app", "--json", cwd=tmp_path, env=env)
    assert json.loads(shown.stdout)["dead"] == 1, shown.stdout
