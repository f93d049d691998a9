"""The dashboard's running jobs in a real browser: a real worker process runs a job that
reports its progress and waits on a gate file, and another job was cancelled; headless
Chromium loads a real `runnel dashboard` process. The Job queue section lists the running
job with its try, its progress (a bar and the percentage) and message, and counts the
cancelled job; once the job ends the list is empty.
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support.dashboard import Dashboard, import_file, on_page
from tests.support.processes import WorkerProcess, env_with, wait_for

APP = """
import asyncio
from pathlib import Path

from runnel import App
from runnel.jobs import report_progress

app = App(name={name!r}, default_grace_period=2)
HERE = Path(__file__).parent


@app.job
async def resize(image: int) -> int:
    await report_progress(0.375, f"resizing image {{image}}")
    while not (HERE / "gate").exists():
        await asyncio.sleep(0.02)
    return image
"""


def rows(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def cells(row: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    return [td.text for td in row.find_elements(By.TAG_NAME, "td")]


def test_running_jobs_show_their_progress_and_cancelled_jobs_are_counted(
    tmp_path: Path, app_name: str, redis_url: str, browser: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "runapp.py").write_text(textwrap.dedent(APP.format(name=app_name)))
    monkeypatch.setenv("RUNNEL_REDIS_URL", redis_url)
    mod = import_file(tmp_path / "runapp.py", f"runapp_{app_name}")

    async def enqueue() -> None:
        try:
            await mod.resize.delay(7, job_id="running")
            dropped = await mod.resize.delay(8, job_id="dropped")
            assert await dropped.cancel()
        finally:
            await mod.app.aclose()

    asyncio.run(enqueue())
    env = env_with(redis_url)
    with WorkerProcess("runapp:app", tmp_path, env) as worker:
        dashboard = Dashboard("runapp:app", tmp_path, env, "--sample-every", "0.5")
        try:
            browser.get(dashboard.url)
            wait_for(lambda: rows(browser, "tr.running-job[data-id=running] .bar"), 60)
            [row] = on_page(lambda: [cells(r) for r in rows(browser, "tr.running-job")])
            job_id, name, _, tries, progress, message, executor = row
            assert (job_id, name, tries, progress) == ("running", "resize", "1", "37%")
            assert message == "resizing image 7"
            assert executor.split(":")[1] == str(worker.proc.pid)
            style = on_page(
                lambda: rows(browser, "tr.running-job .bar .fill")[0].get_attribute("style")
            )
            assert style == "width: 37%;"
            assert on_page(lambda: rows(browser, "[data-count=cancelled] b")[0].text) == "1"
            assert on_page(lambda: rows(browser, "[data-count=executing] b")[0].text) == "1"

            (tmp_path / "gate").touch()
            wait_for(lambda: not rows(browser, "tr.running-job"), 60)
            assert "no job running" in on_page(lambda: rows(browser, "#jobs")[0].text)
        finally:
            dashboard.close()
        assert worker.stop() == 0
