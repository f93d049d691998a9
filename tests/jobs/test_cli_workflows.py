"""`runnel jobs show` of a workflow and of its jobs, through the real `python -m runnel`
against a real redis-server. A workflow is enqueued and run by a worker in the test's own
loop (setup, not under test); the command line is what is tested."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from runnel.runtime.worker import Worker
from tests.support.processes import cli, env_with

MODULE = "flowcli"

APP_SOURCE = """
from runnel import App

app = App(name=APP_NAME, redis_url=REDIS_URL, job_heartbeat_timeout=2, default_grace_period=1)


@app.job
async def resize(image_id: int, width: int = 100) -> str:
    return f"images/{image_id}-{width}.png"


@app.job
async def bundle(paths: list[str]) -> str:
    return f"{len(paths)} images"


@app.job(retries=0)
async def charge(order_id: int, amount: float) -> dict:
    if amount < 0:
        raise ValueError(f"cannot charge {amount}")
    return {"order": order_id}


@app.job
async def report(workflow: str, failed: str, error: str) -> None:
    pass
"""


@pytest.fixture
def shop(tmp_path: Path, app_name: str, redis_url: str) -> Any:
    source = textwrap.dedent(APP_SOURCE).replace("APP_NAME", repr(app_name))
    source = source.replace("REDIS_URL", repr(redis_url))
    (tmp_path / f"{MODULE}.py").write_text(source)
    name = f"{MODULE}_{app_name}"
    spec = importlib.util.spec_from_file_location(name, tmp_path / f"{MODULE}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def flows(shop: Any) -> tuple[str, str, list[tuple[str, str, str]]]:
    """A chord that completes and a chain that fails, run to their end."""
    from runnel import chain, chord, group

    async def go() -> tuple[str, str, list[tuple[str, str, str]]]:
        worker = Worker(shop.app, processors=[], jobs=True)
        running = asyncio.create_task(worker.run())
        try:
            ok = await chord(group(shop.resize.s(i) for i in range(3)), shop.bundle.s()).delay()
            assert await ok.get(timeout=30) == "3 images"
            bad = chain(shop.charge.s(41, -5), shop.resize.si(41), on_error=shop.report.s())
            handle = await bad.delay()
            with pytest.raises(Exception, match="cannot charge"):
                await handle.get(timeout=30)
            members = await handle.members()
            async with asyncio.timeout(30):
                while members[-1][2] != "SUCCESS":
                    await asyncio.sleep(0.02)
                    members = await handle.members()
            return ok.id, handle.id, members
        finally:
            worker.stop()
            await running
            await shop.app.aclose()

    return asyncio.run(go())


def test_show_a_workflow_and_its_jobs(shop: Any, tmp_path: Path, redis_url: str) -> None:
    ok, bad, members = flows(shop)
    env = env_with(redis_url)
    target = f"{MODULE}:app"
    shown = cli("jobs", "show", target, ok, cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"workflow:  {ok}"
    assert lines[1:3] == ["shape:     chord(group(resize x 3), bundle)", "status:    COMPLETE"]
    assert 'result:    "3 images"' in lines
    assert "jobs:      4" in lines
    assert [line.split()[1:] for line in lines[-4:]] == [["resize", "SUCCESS"]] * 3 + [
        ["bundle", "SUCCESS"]
    ]

    shown = cli("jobs", "show", target, bad, cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    charge_id = members[0][0]
    assert "status:    FAILED" in shown.stdout
    assert f"failed:    charge {charge_id}: ValueError: cannot charge -5.0" in shown.stdout
    tail = [line.split()[1:] for line in shown.stdout.splitlines()[-3:]]
    assert tail == [
        ["charge", "DEAD"],
        ["resize", "CANCELLED"],
        ["report", "SUCCESS", "(on_error)"],
    ]

    as_json = cli("jobs", "show", target, bad, "--json", cwd=tmp_path, env=env)
    report = json.loads(as_json.stdout)
    assert (report["workflow"], report["status"]) == (bad, "FAILED")
    assert report["failed"] == {
        "id": charge_id,
        "name": "charge",
        "error": "ValueError: cannot charge -5.0",
    }

    member = cli("jobs", "show", target, charge_id, cwd=tmp_path, env=env)
    assert f"workflow:  {bad}" in member.stdout.splitlines()


def test_show_an_unknown_id_is_one_error_line(shop: Any, tmp_path: Path, redis_url: str) -> None:
    shown = cli("jobs", "show", f"{MODULE}:app", "nope", cwd=tmp_path, env=env_with(redis_url))
    assert shown.returncode == 1
    assert shown.stderr.strip().splitlines() == [
        f"Error: no job or workflow with id 'nope' in app {shop.app.name}"
    ]
    assert "Traceback" not in shown.stderr
