"""`runnel dashboard` in a real browser: a real worker process runs a processor and a job
queue holding a dead job; headless Chromium loads the page of a real dashboard process.

The DOM must show each partition with its owner and the dead job; with --allow-actions a
click on "replay" (confirmed) enqueues the job again, as the job store then says. Without
it there are no buttons and the action endpoint answers 403.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import textwrap
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from runnel.jobs.model import JobStatus
from runnel.runtime.worker import Worker
from runnel.store.jobs import JobStore
from runnel_dashboard.snapshot import hide_password
from tests.support.dashboard import Dashboard, import_file, on_page
from tests.support.ports import start_redis
from tests.support.processes import WorkerProcess, cli, env_with, wait_for

MODULE = "dashapp"
TARGET = f"{MODULE}:app"
PARTITIONS = 3

APP_SOURCE = """
from runnel import App, Record

app = App(name={name!r}, default_join_delay=0, default_grace_period=2)


class Ping(Record):
    key: str
    n: int


pings = app.stream("pings", record=Ping, partition_by="key", partition_count={partitions})


@app.processor(pings)
async def tally(events):
    async for ping in events.records():
        pass


@app.job(retries=0)
async def fail(message: str) -> str:
    raise ValueError(f"failing on purpose: {{message}}")


@app.timer(interval=30)
async def tick():
    pass
"""


@pytest.fixture
def module(
    tmp_path: Path, app_name: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> ModuleType:
    """The app module, written to ``tmp_path`` and imported in this process too."""
    monkeypatch.setenv("RUNNEL_REDIS_URL", redis_url)
    path = tmp_path / f"{MODULE}.py"
    path.write_text(textwrap.dedent(APP_SOURCE.format(name=app_name, partitions=PARTITIONS)))
    mod = import_file(path, f"{MODULE}_{app_name}")
    return mod


def in_store(mod: ModuleType, call: Callable[[JobStore], Awaitable[Any]]) -> Any:
    """Ask the app's job store something, through the public interface."""

    async def go() -> Any:
        try:
            return await call(mod.app.job_store)
        finally:
            await mod.app.aclose()

    return asyncio.run(go())


def enqueue_doomed(mod: ModuleType, events: int = 0) -> None:
    """The job "doomed" (it fails its only try), after ``events`` events on the stream."""

    async def go() -> None:
        try:
            for n in range(events):
                await mod.pings.send(mod.Ping(key=f"k{n}", n=n))
            await mod.fail.delay("boom", job_id="doomed")
        finally:
            await mod.app.aclose()

    asyncio.run(go())


def status_of(mod: ModuleType, job_id: str) -> JobStatus:
    return in_store(mod, lambda store: store.status(job_id))


def rows(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def cells(row: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    return [td.text for td in row.find_elements(By.TAG_NAME, "td")]


def row_of(driver: Any, selector: str) -> tuple[str, list[str]] | None:
    """The ``data-id`` and cells of the one row ``selector`` finds; None until there is one."""
    found = rows(driver, selector)
    if len(found) != 1:
        return None
    return found[0].get_attribute("data-id"), cells(found[0])


def click(driver: Any, selector: str) -> bool:
    [button] = rows(driver, selector)
    button.click()
    return True


def post(url: str, body: dict[str, Any], headers: dict[str, str]) -> int:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def partitions_shown(driver: Any) -> dict[int, tuple[str, str]] | None:
    """{partition: (owner, state)} once every partition shows an owner."""
    shown = {}
    for row in rows(driver, "tr.partition[data-processor=tally]"):
        number, owner, state, *_ = cells(row)
        shown[int(number)] = (owner, state)
    if len(shown) == PARTITIONS and all(owner != "-" for owner, _ in shown.values()):
        return shown
    return None


def test_the_page_shows_a_running_app_and_replays_a_dead_job(
    module: ModuleType, tmp_path: Path, redis_url: str, browser: Any
) -> None:
    env = env_with(redis_url)
    with WorkerProcess(TARGET, tmp_path, env) as worker:
        enqueue_doomed(module, events=12)
        wait_for(lambda: status_of(module, "doomed") == JobStatus.DEAD)
        dashboard = Dashboard(TARGET, tmp_path, env, "--allow-actions", "--sample-every", "0.5")
        try:
            browser.get(dashboard.url)
            shown = on_page(lambda: partitions_shown(browser))
            executor_id, executor = on_page(lambda: row_of(browser, "tr.executor"))
            assert shown == {n: (executor_id, "owned") for n in range(PARTITIONS)}
            assert executor[3] == "alive"
            heading = on_page(lambda: rows(browser, ".processor[data-name=tally] h3")[0].text)
            assert heading == "tally stream pings, 12 events stored"

            _, dead = on_page(lambda: row_of(browser, "tr.dead[data-id=doomed]"))
            assert dead[1:4] == ["doomed", "fail", "ValueError: failing on purpose: boom"]
            assert on_page(lambda: rows(browser, "[data-count=dead] b")[0].text) == "1"
            assert "tick" in on_page(lambda: [cells(r)[0] for r in rows(browser, "tr.scheduled")])
            # The sparkline appears once the server has two samples.
            wait_for(lambda: rows(browser, "#throughput svg polyline"))
            # Each figure says, as its tooltip, what it counts and how fresh it is.
            notes = browser.execute_script(
                "return [...document.querySelectorAll('#throughput figure.spark')]"
                ".map((f) => [f.querySelector('figcaption').textContent, f.title])"
            )
            jobs_note = next(n for caption, n in notes if caption.startswith("jobs finished"))
            assert "as it records each outcome" in jobs_note
            heads = on_page(
                lambda: {
                    h.text: h.get_attribute("title")
                    for h in rows(browser, "tr.job-executor")[0]
                    .find_element("xpath", "ancestor::table")
                    .find_elements("css selector", "th")
                }
            )
            for column in ("running", "succeeded", "failed tries"):
                assert "last heartbeat" in heads[column] and "s (job_heartbeat" in heads[column]

            shot = tmp_path / "dashboard.png"
            assert browser.save_screenshot(str(shot))
            data = shot.read_bytes()
            assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000

            # The worker stops first, so that nothing runs the replayed job again.
            assert worker.stop() == 0
            on_page(lambda: click(browser, "tr.dead[data-id=doomed] button.replay"))
            alert = wait_for(lambda: _alert(browser))
            assert "doomed" in alert.text
            alert.accept()
            wait_for(lambda: status_of(module, "doomed") == JobStatus.SENT)
            assert in_store(module, lambda store: store.dead_letters()) == []
            wait_for(lambda: not rows(browser, "tr.dead"))

            # Not from another site: no token, or a foreign Origin, is refused.
            action = dashboard.url + "api/actions/dead-job-purge"
            json_type = {"Content-Type": "application/json"}
            assert post(action, {"ids": ["doomed"]}, json_type) == 403
            token = rows(browser, "meta[name=runnel-token]")[0].get_attribute("content")
            foreign = {**json_type, "X-Runnel-Token": token, "Origin": "http://evil.example"}
            assert post(action, {"ids": ["doomed"]}, foreign) == 403
            assert status_of(module, "doomed") == JobStatus.SENT
        finally:
            dashboard.close()


def _alert(driver: Any) -> Any:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        return driver.switch_to.alert
    except NoAlertPresentException:
        return None


def test_read_only_without_allow_actions(
    module: ModuleType, tmp_path: Path, redis_url: str, browser: Any
) -> None:
    """No buttons; the action endpoints answer 403 even with the page's token."""
    enqueue_doomed(module)

    async def work() -> None:  # an in-process worker kills the job (setup only)
        worker = Worker(module.app)
        task = asyncio.create_task(worker.run())
        try:
            async with asyncio.timeout(60):  # a hang guard
                while True:
                    if await module.app.job_store.status("doomed") == JobStatus.DEAD:
                        break
                    await asyncio.sleep(0.05)
        finally:
            worker.stop()
            await task
            await module.app.aclose()

    asyncio.run(work())
    dashboard = Dashboard(TARGET, tmp_path, env_with(redis_url))
    try:
        browser.get(dashboard.url)
        wait_for(lambda: rows(browser, "tr.dead[data-id=doomed]"))
        assert rows(browser, "button") == []
        token = rows(browser, "meta[name=runnel-token]")[0].get_attribute("content")
        assert token == ""
        headers = {"Content-Type": "application/json", "X-Runnel-Token": token}
        for action in ("dead-job-replay", "dead-job-purge"):
            url = dashboard.url + f"api/actions/{action}"
            assert post(url, {"ids": ["doomed"]}, headers) == 403
        assert status_of(module, "doomed") == JobStatus.DEAD
    finally:
        dashboard.close()


def test_bad_input_is_one_error_line(module: ModuleType, tmp_path: Path, redis_url: str) -> None:
    env = env_with(redis_url)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = cli("dashboard", TARGET, "--port", port, cwd=tmp_path, env=env)
    assert_one_error_line(done, f"port {port}")
    done = cli("dashboard", "nosuchmodule:app", "--port", "0", cwd=tmp_path, env=env)
    assert_one_error_line(done, "nosuchmodule")


def test_refused_credentials_fail_at_start_in_one_line(module: ModuleType, tmp_path: Path) -> None:
    """As every command: exit 1 and one Error: line, before any banner, password hidden.
    (A Redis that does not answer is different: the page reports it, see below.)"""
    server = start_redis(tmp_path / "locked", persist=False)
    try:
        admin = redis.Redis(port=server.port)
        admin.config_set("requirepass", "admin-Pw-31c")
        admin.close()
        env = env_with(f"redis://:wrong-Pw-62d@127.0.0.1:{server.port}/0")
        done = cli("dashboard", TARGET, "--port", "0", cwd=tmp_path, env=env)
    finally:
        os.kill(server.pid, signal.SIGTERM)
    assert done.returncode == 1
    assert done.stdout == "", "no banner"
    assert_one_error_line(done, "authentication failed for user 'default'", ":***@")
    assert "Pw-" not in done.stderr


def test_the_core_stub_says_what_to_install() -> None:
    """Without the plugin, `runnel dashboard` is core's stand-in, which names the extra."""
    from runnel.cli.missing import dashboard

    done = CliRunner().invoke(dashboard, ["x:app", "--port", "1"])
    assert done.exit_code == 1
    lines = done.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:"), done.output
    assert "runnel[dashboard]" in lines[0]


def test_a_password_is_never_shown() -> None:
    assert hide_password("redis://user:s3cret@host:6380/0") == "redis://user:***@host:6380/0"
    assert hide_password("redis://:s3cret@host/0") == "redis://:***@host/0"
    assert hide_password("redis://host:6380/0") == "redis://host:6380/0"


def assert_one_error_line(done: Any, *names: str) -> None:
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("Error:"), done.stderr
    for name in names:
        assert name in err, err


def test_a_store_it_cannot_read_is_reported_without_its_password(
    module: ModuleType, tmp_path: Path
) -> None:
    """It starts, saying so on stderr; the page still loads; the feed answers 503 with
    one line; the password hidden everywhere."""
    env = env_with("redis://:hunter2@127.0.0.1:1/0")
    dashboard = Dashboard(TARGET, tmp_path, env)
    try:
        with urllib.request.urlopen(dashboard.url, timeout=30) as answer:
            assert "hunter2" not in answer.read().decode()
        with pytest.raises(urllib.error.HTTPError) as failed:
            urllib.request.urlopen(dashboard.url + "api/state", timeout=60)
        assert failed.value.code == 503
        error = json.loads(failed.value.read())["error"]
        assert "redis://:***@127.0.0.1:1/0" in error and "hunter2" not in error, error
    finally:
        dashboard.close()
    log = dashboard.log_path.read_text()
    assert "hunter2" not in log
    assert "warning: cannot reach redis://:***@127.0.0.1:1/0: " in log
    assert "; the page says so until it answers" in log
