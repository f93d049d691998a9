"""The jobs views and the job actions in a real browser: a real worker process runs an app
whose jobs end up succeeded, dead, waiting for a retry, scheduled and running; headless
Chromium loads a real `runnel dashboard --allow-actions --audit-log` process.

Each list shows its jobs (and only those matching the filters), a job's page shows its
arguments, result, tries, timings and traceback, the figures per job name count them,
and each button (confirmed) does what it says, as the job store then tells, with a line
in the audit log naming who did it.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runnel.jobs.model import JobStatus
from tests.support.dashboard import Dashboard, import_file
from tests.support.processes import WorkerProcess, env_with, wait_for

APP = """
import asyncio
from pathlib import Path

from runnel import App

app = App(name={name!r}, default_grace_period=2, job_backoff_base=3600, job_backoff_cap=7200)
HERE = Path(__file__).parent


@app.job(retries=0)
async def add(a: int, b: int) -> int:
    return a + b


@app.job(retries=0)
async def fail(message: str) -> str:
    raise ValueError(f"failing on purpose: {{message}}")


@app.job(retries=1)
async def flaky(n: int) -> int:
    marker = HERE / f"flaky-{{n}}"
    if not marker.exists():
        marker.write_text("tried")
        raise RuntimeError("the first try fails")
    return n


@app.job(queue="bulk")
async def later(n: int) -> int:
    return n


@app.job(serializer="msgpack")
async def measure(x: float) -> list[float]:
    return [x, -x]


@app.job
async def slow(n: int) -> int:
    while not (HERE / "gate").exists():
        await asyncio.sleep(0.02)
    return n
"""


@pytest.fixture
def module(
    tmp_path: Path, app_name: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> ModuleType:
    monkeypatch.setenv("RUNNEL_REDIS_URL", redis_url)
    (tmp_path / "jobsapp.py").write_text(textwrap.dedent(APP.format(name=app_name)))
    mod = import_file(tmp_path / "jobsapp.py", f"jobsapp_{app_name}")
    return mod


def call(mod: ModuleType, make: Any) -> Any:
    async def go() -> Any:
        try:
            return await make()
        finally:
            await mod.app.aclose()

    return asyncio.run(go())


def status(mod: ModuleType, job_id: str) -> JobStatus:
    return call(mod, lambda: mod.app.job_store.status(job_id))


def rows(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def cells(row: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    return [td.text for td in row.find_elements(By.TAG_NAME, "td")]


def listed(driver: Any, url: str, hash_: str) -> dict[str, list[str]]:
    """The rows of the jobs list at ``#hash_``, by job id, once it is drawn."""
    opened(driver, url, hash_)
    return {r.get_attribute("data-id"): cells(r) for r in rows(driver, "tr.job-row")}


def opened(driver: Any, url: str, hash_: str) -> None:
    """Go to ``#hash_`` and wait until the page has drawn it."""
    driver.get(url + hash_)
    drawn = "return document.body.dataset.jobsLoaded === location.hash"
    wait_for(lambda: driver.execute_script(drawn))


def confirm(driver: Any, selector: str, *named: str) -> str:
    """Click the button, accept its confirmation (which names ``named``); the outcome."""
    from selenium.common.exceptions import NoAlertPresentException

    def alert() -> Any:
        try:
            return driver.switch_to.alert
        except NoAlertPresentException:
            return None

    before = driver.execute_script("return document.getElementById('outcome').textContent")
    wait_for(lambda: rows(driver, selector))[0].click()
    box = wait_for(alert)
    for name in named:
        assert name in box.text, box.text
    box.accept()

    def outcome() -> str | None:
        text = driver.execute_script("return document.getElementById('outcome').textContent")
        return text if text and text != before else None

    return str(wait_for(outcome))


def test_every_jobs_view_and_every_job_action_from_the_page(
    module: ModuleType, tmp_path: Path, redis_url: str, browser: Any
) -> None:
    env = env_with(redis_url)
    mod = module

    async def enqueue() -> None:
        await mod.add.delay(2, 3, job_id="add-1")
        await mod.fail.delay("boom", job_id="doomed")
        await mod.flaky.delay(7, job_id="flaky-7")
        await mod.later.delay(1, job_id="later-1", countdown=3600)
        await mod.slow.delay(1, job_id="slow-1")

    with WorkerProcess("jobsapp:app", tmp_path, env):
        call(mod, enqueue)
        for job_id, expected in (
            ("add-1", JobStatus.SUCCESS),
            ("doomed", JobStatus.DEAD),
            ("flaky-7", JobStatus.RETRY),
            ("slow-1", JobStatus.EXECUTING),
        ):
            wait_for(lambda j=job_id, e=expected: status(mod, j) == e)
        audit = tmp_path / "audit.jsonl"
        flags = ("--allow-actions", "--audit-log", str(audit))
        board = Dashboard("jobsapp:app", tmp_path, env, *flags)
        try:
            url = board.url
            recent = listed(browser, url, "#/jobs?list=recent")
            assert recent["add-1"][1:5] == ["add", "default", "SUCCESS", "1/1"]
            assert recent["add-1"][6].endswith(("ms", " s"))  # its run time
            running = listed(browser, url, "#/jobs?list=running")
            assert list(running) == ["slow-1"] and running["slow-1"][3] == "EXECUTING"
            retrying = listed(browser, url, "#/jobs?list=retrying")
            assert list(retrying) == ["flaky-7"]
            assert retrying["flaky-7"][3:5] == ["RETRY", "1/2"]
            assert retrying["flaky-7"][7] == "RuntimeError: the first try fails"
            scheduled = listed(browser, url, "#/jobs?list=scheduled")
            assert list(scheduled) == ["later-1"] and scheduled["later-1"][2] == "bulk"
            dead = listed(browser, url, "#/jobs?list=dead")
            assert list(dead) == ["doomed"]
            assert dead["doomed"][7] == "ValueError: failing on purpose: boom"
            # Filters: by job name, by queue.
            assert listed(browser, url, "#/jobs?list=recent&name=fail") == {}
            assert list(listed(browser, url, "#/jobs?list=recent&name=add")) == ["add-1"]
            assert listed(browser, url, "#/jobs?list=scheduled&queue=default") == {}
            assert list(listed(browser, url, "#/jobs?list=scheduled&queue=bulk")) == ["later-1"]

            # The figures per job name.
            stats = {r.get_attribute("data-name"): cells(r) for r in rows(browser, "tr.job-stats")}
            assert stats["add"][1:4] == ["1", "0", "0"] and stats["add"][5] == "0.0%"
            assert stats["add"][6] != "-" and stats["add"][7] != "-"
            assert stats["fail"][1:3] == ["0", "1"] and stats["fail"][5] == "100.0%"

            # Search by id opens the job's page: arguments, result, tries, timings.
            box = wait_for(lambda: rows(browser, "form.search input[name=id]"))[0]
            box.send_keys("add-1\n")
            wait_for(lambda: rows(browser, "#job-page [data-fact=name]"))
            facts = {e.get_attribute("data-fact"): e.text for e in rows(browser, "[data-fact]")}
            assert (facts["name"], facts["status"], facts["tries"]) == ("add", "SUCCESS", "1 of 1")
            assert facts["started"] != "-" and facts["finished"] != "-" and facts["run time"] != "-"
            assert json.loads(rows(browser, ".args pre")[0].text) == [2, 3]
            assert rows(browser, ".result pre")[0].text == "5"
            assert rows(browser, "#job-page button") == []  # nothing to do to a success
            opened(browser, url, "#/jobs/doomed")
            trace = wait_for(lambda: rows(browser, "#job-page pre.traceback"))[0].text
            assert "Traceback" in trace and "failing on purpose: boom" in trace

            # Actions, each confirmed.
            opened(browser, url, "#/jobs/flaky-7")
            said = confirm(browser, "#job-page button.retry-now", "flaky-7")
            assert said.startswith("job flaky-7 is due now")
            wait_for(lambda: status(mod, "flaky-7") == JobStatus.SUCCESS)
            listed(browser, url, "#/jobs?list=scheduled")
            said = confirm(browser, "tr.job-row[data-id=later-1] button.cancel", "later-1")
            assert said == "cancelled job later-1 (it was SENT)"
            assert status(mod, "later-1") == JobStatus.CANCELLED
            opened(browser, url, "#/jobs/slow-1")
            said = confirm(browser, "#job-page button.cancel", "slow-1")
            assert said == "cancelled job slow-1 (it was EXECUTING)"
            assert status(mod, "slow-1") == JobStatus.CANCELLED
            opened(browser, url, "#/jobs/doomed")
            said = confirm(browser, "#job-page button.purge", "doomed")
            assert said == "purged 1 dead job"
            assert status(mod, "doomed") == JobStatus.UNKNOWN
        finally:
            board.close()
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [(x["action"], x["target"], x["outcome"]) for x in lines] == [
        ("job-retry", {"id": "flaky-7"}, "done"),
        ("job-cancel", {"id": "later-1"}, "done"),
        ("job-cancel", {"id": "slow-1"}, "done"),
        ("dead-job-purge", {"ids": ["doomed"]}, "done"),
    ]
    assert {(x["who"], x["client"]) for x in lines} == {("local", "127.0.0.1")}
    log = board.log_path.read_text()
    assert "runnel.dashboard.audit: local from 127.0.0.1: job-cancel " in log


def test_a_job_page_with_a_nan_is_still_json(
    module: ModuleType, tmp_path: Path, redis_url: str
) -> None:
    """msgpack carries NaN and the infinities; the page's data shows them as text: as
    bare NaN tokens (what Python's json writes) the browser could read nothing."""
    call(module, lambda: module.measure.delay(float("nan"), job_id="m-1"))
    board = Dashboard("jobsapp:app", tmp_path, env_with(redis_url))
    try:
        with urllib.request.urlopen(board.url + "api/jobs/m-1", timeout=30) as answer:
            text = answer.read().decode()
    finally:
        board.close()

    def not_json(token: str) -> Any:
        raise AssertionError(f"{token} is not JSON: {text}")

    page = json.loads(text, parse_constant=not_json)
    assert page["args"] == ["nan"]
