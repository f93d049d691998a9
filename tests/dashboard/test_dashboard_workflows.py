"""The dashboard's workflows in a real browser: a real worker process runs a chord whose
members wait on a gate file, and a chain that fails; headless Chromium loads a real
`runnel dashboard` process. The Workflows table lists both, most recent first, with their
shape and status, and each one's jobs with their statuses (the callback WAITING while its
members run; the failed chain's job DEAD, the next CANCELLED).
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.dashboard import Dashboard, import_file
from tests.support.processes import WorkerProcess, env_with, wait_for

APP = """
import asyncio
from pathlib import Path

from runnel import App

app = App(name={name!r}, default_grace_period=2)
HERE = Path(__file__).parent


@app.job
async def resize(image: int) -> int:
    while not (HERE / "gate").exists():
        await asyncio.sleep(0.02)
    return image


@app.job
async def bundle(images: list[int]) -> int:
    return len(images)


@app.job(retries=0)
async def charge(amount: float) -> float:
    raise ValueError(f"cannot charge {{amount}}")
"""


SNAPSHOT = """
return [...document.querySelectorAll("tr.workflow")].map((row) => ({
  id: row.dataset.id,
  cells: [...row.children].map((td) => td.textContent),
  members: [...row.querySelectorAll("tr.member")].map((m) =>
    [...m.children].map((td) => td.textContent)),
}));
"""
"""The Workflows table read in one go: the page redraws every poll, so elements found
one by one could belong to two different drawings."""


def workflows(driver: Any) -> dict[str, dict[str, Any]]:
    return {w["id"]: {**w, "at": i} for i, w in enumerate(driver.execute_script(SNAPSHOT))}


def test_workflows_and_their_jobs_are_listed(
    tmp_path: Path, app_name: str, redis_url: str, browser: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "flowapp.py").write_text(textwrap.dedent(APP.format(name=app_name)))
    monkeypatch.setenv("RUNNEL_REDIS_URL", redis_url)
    mod = import_file(tmp_path / "flowapp.py", f"flowapp_{app_name}")

    async def enqueue() -> tuple[str, str]:
        from runnel import chain, chord

        try:
            bad = await chain(mod.charge.s(-5), mod.bundle.si([])).delay()
            ok = await chord([mod.resize.s(1), mod.resize.s(2)], mod.bundle.s()).delay()
            return ok.id, bad.id
        finally:
            await mod.app.aclose()

    ok, bad = asyncio.run(enqueue())
    env = env_with(redis_url)
    with WorkerProcess("flowapp:app", tmp_path, env) as worker:
        dashboard = Dashboard("flowapp:app", tmp_path, env, "--sample-every", "0.5")
        try:
            browser.get(dashboard.url)

            def seen() -> dict[str, dict[str, Any]] | None:
                shown = workflows(browser)
                members = [m for w in shown.values() for m in w["members"]]
                running = [m for m in members if m[2] == "EXECUTING"]
                return (
                    shown
                    if len(running) == 2 and ["DEAD"] == [m[2] for m in members if m[2] == "DEAD"]
                    else None
                )

            shown = wait_for(seen, 60)
            first, second = shown[ok], shown[bad]
            assert (first["at"], second["at"]) == (0, 1)  # most recent first
            assert first["cells"][1:3] == ["chord(group(resize x 2), bundle)", "RUNNING"]
            assert [(name, status) for _, name, status in first["members"]] == [
                ("resize", "EXECUTING"),
                ("resize", "EXECUTING"),
                ("bundle", "WAITING"),
            ]
            shape, status = second["cells"][1:3]
            assert shape == "chain(charge, bundle)"
            assert status.startswith("FAILED") and "ValueError: cannot charge -5.0" in status
            assert [(name, s) for _, name, s in second["members"]] == [
                ("charge", "DEAD"),
                ("bundle", "CANCELLED"),
            ]

            (tmp_path / "gate").touch()
            done = wait_for(
                lambda: (w := workflows(browser))[ok]["cells"][2] == "COMPLETE" and w, 60
            )
            assert {s for _, _, s in done[ok]["members"]} == {"SUCCESS"}
        finally:
            dashboard.close()
        assert worker.stop() == 0
