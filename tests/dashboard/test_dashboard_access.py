"""Who may use a real `runnel dashboard` process: with basic auth or a token every request
needs them (401 otherwise); off loopback it does not serve without them unless told to
serve read-only; a refused action changes nothing and is in the audit log; a password or
token is never printed.

The action tried is a cancel of a job scheduled an hour from now (no worker runs)."""

from __future__ import annotations

import asyncio
import base64
import json
import textwrap
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runnel.jobs.model import JobStatus
from tests.support.dashboard import Dashboard, import_file
from tests.support.processes import cli, env_with, wait_for

APP = """
from runnel import App

app = App(name={name!r})


@app.job
async def later(n: int) -> int:
    return n
"""
PASSWORD = "Secret-Pw-93f"
TOKEN = "tok-Secret-71c-abcdefgh"
CANCEL = "api/actions/job-cancel"


@pytest.fixture
def module(
    tmp_path: Path, app_name: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> ModuleType:
    """The app, with the job "later-1" on the schedule."""
    monkeypatch.setenv("RUNNEL_REDIS_URL", redis_url)
    (tmp_path / "authapp.py").write_text(textwrap.dedent(APP.format(name=app_name)))
    mod = import_file(tmp_path / "authapp.py", f"authapp_{app_name}")

    async def go() -> None:
        try:
            await mod.later.delay(1, job_id="later-1", countdown=3600)
        finally:
            await mod.app.aclose()

    asyncio.run(go())
    return mod


def status(mod: ModuleType) -> JobStatus:
    async def go() -> JobStatus:
        try:
            return await mod.app.job_store.status("later-1")
        finally:
            await mod.app.aclose()

    return asyncio.run(go())


def request(
    url: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> tuple[int, Any, str]:
    """(status, headers (any case), text) of a GET, or of a POST of ``body`` as JSON."""
    data = None if body is None else json.dumps(body).encode()
    sent = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(sent, timeout=30) as answer:
            return answer.status, answer.headers, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read().decode()


def basic(user: str, password: str) -> dict[str, str]:
    pair = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {pair}"}


def page_token(url: str, headers: dict[str, str]) -> str:
    code, _, text = request(url, headers=headers)
    assert code == 200, text
    return text.split('name="runnel-token" content="')[1].split('"')[0]


def action_headers(token: str, extra: dict[str, str]) -> dict[str, str]:
    return {"Content-Type": "application/json", "X-Runnel-Token": token, **extra}


def test_basic_auth_is_asked_of_every_request(
    module: ModuleType, tmp_path: Path, redis_url: str
) -> None:
    env = env_with(redis_url, RUNNEL_DASHBOARD_BASIC_AUTH=f"ops:{PASSWORD}")
    audit = tmp_path / "audit.jsonl"
    board = Dashboard("authapp:app", tmp_path, env, "--allow-actions", "--audit-log", str(audit))
    try:
        url = board.url
        for path in (
            "",
            "api/state",
            "api/jobs?list=scheduled",
            "api/jobs/later-1",
            "static/app.js",
        ):
            code, headers, _ = request(url + path)
            assert code == 401, path
            assert headers["WWW-Authenticate"].startswith('Basic realm="runnel dashboard"')
            assert request(url + path, headers=basic("ops", "wrong"))[0] == 401
        token = page_token(url, basic("ops", PASSWORD))
        assert token
        # An action without the credentials, even with the page's token: 401, nothing done.
        no_login = action_headers(token, {})
        assert request(url + CANCEL, {"id": "later-1"}, no_login)[0] == 401
        assert status(module) == JobStatus.SENT
        code, _, text = request(url + "api/jobs/later-1", headers=basic("ops", PASSWORD))
        assert code == 200 and json.loads(text)["can_cancel"] is True
        ok = action_headers(token, basic("ops", PASSWORD))
        code, _, text = request(url + CANCEL, {"id": "later-1"}, ok)
        assert (code, json.loads(text)) == (200, {"message": "cancelled job later-1 (it was SENT)"})
        assert status(module) == JobStatus.CANCELLED
    finally:
        board.close()
    [line] = [json.loads(x) for x in audit.read_text().splitlines()]
    assert (line["who"], line["action"], line["outcome"]) == ("ops", "job-cancel", "done")
    log = board.log_path.read_text()
    assert "(actions allowed, basic auth required)" in log
    assert "runnel.dashboard.audit: ops from 127.0.0.1: job-cancel" in log
    assert PASSWORD not in log + audit.read_text()


def test_a_token_opens_the_page_once_and_its_buttons_act(
    module: ModuleType, tmp_path: Path, redis_url: str, browser: Any
) -> None:
    env = env_with(redis_url, RUNNEL_DASHBOARD_TOKEN=TOKEN)
    audit = tmp_path / "audit.jsonl"
    board = Dashboard("authapp:app", tmp_path, env, "--allow-actions", "--audit-log", str(audit))
    try:
        url = board.url
        code, headers, _ = request(url + "api/state")
        assert code == 401 and headers["WWW-Authenticate"].startswith("Bearer")
        assert request(url + "api/state", headers={"Authorization": "Bearer nope"})[0] == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert request(url + "api/state", headers=bearer)[0] == 200

        browser.get(url)
        assert "authentication required" in browser.page_source
        browser.get(url + f"?token={TOKEN}#/jobs/later-1")
        assert TOKEN not in browser.current_url  # sent on without it, the cookie kept
        from selenium.webdriver.common.by import By

        cancel = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#job-page .cancel"))
        cancel[0].click()
        alert = wait_for(lambda: browser.switch_to.alert)
        assert "later-1" in alert.text
        alert.accept()
        wait_for(lambda: status(module) == JobStatus.CANCELLED)
        outcome = wait_for(lambda: browser.find_element(By.ID, "outcome").text)
        assert outcome == "cancelled job later-1 (it was SENT)"
    finally:
        board.close()
    [line] = [json.loads(x) for x in audit.read_text().splitlines()]
    assert (line["who"], line["client"], line["outcome"]) == ("token", "127.0.0.1", "done")
    assert TOKEN not in board.log_path.read_text() + audit.read_text()


def test_refused_actions_change_nothing_and_are_audited(
    module: ModuleType, tmp_path: Path, redis_url: str
) -> None:
    env = env_with(redis_url)
    audit = tmp_path / "audit.jsonl"
    board = Dashboard("authapp:app", tmp_path, env, "--allow-actions", "--audit-log", str(audit))
    try:
        url = board.url
        token = page_token(url, {})
        args = {"id": "later-1"}
        json_only = {"Content-Type": "application/json"}
        assert request(url + CANCEL, args, json_only)[0] == 403  # no page token
        assert request(url + CANCEL, args, action_headers("forged", {}))[0] == 403
        foreign = action_headers(token, {"Origin": "http://evil.example"})
        assert request(url + CANCEL, args, foreign)[0] == 403
        as_text = {"Content-Type": "text/plain", "X-Runnel-Token": token}
        assert request(url + CANCEL, args, as_text)[0] == 403
        assert (
            request(url + "api/actions/drop-everything", args, action_headers(token, {}))[0] == 404
        )
        code, _, text = request(
            url + "api/actions/job-retry", {"id": "nosuch"}, action_headers(token, {})
        )
        assert code == 404 and "nosuch" in json.loads(text)["error"]
        assert status(module) == JobStatus.SENT
    finally:
        board.close()
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [x["outcome"] for x in lines] == ["refused"] * 6
    assert lines[2]["detail"] == "cross-site request refused"
    assert {x["who"] for x in lines} == {"local"}


def test_off_loopback_it_needs_credentials_or_serves_read_only(
    module: ModuleType, tmp_path: Path, redis_url: str
) -> None:
    env = env_with(redis_url)
    done = cli(
        "dashboard", "authapp:app", "--host", "0.0.0.0", "--port", "0", cwd=tmp_path, env=env
    )
    assert_one_error_line(done, "--host 0.0.0.0 is not loopback", "--public-read-only")
    both = ("--host", "0.0.0.0", "--public-read-only", "--allow-actions")
    done = cli("dashboard", "authapp:app", *both, "--port", "0", cwd=tmp_path, env=env)
    assert_one_error_line(done, "contradict")

    board = Dashboard("authapp:app", tmp_path, env, "--host", "0.0.0.0", "--public-read-only")
    try:
        url = board.url.replace("0.0.0.0", "127.0.0.1")
        token = page_token(url, {})
        assert token == ""  # read-only: no buttons, no token
        assert request(url + CANCEL, {"id": "later-1"}, action_headers(token, {}))[0] == 403
        assert status(module) == JobStatus.SENT
    finally:
        board.close()
    assert "(read-only)" in board.log_path.read_text()

    secret = env_with(redis_url, RUNNEL_DASHBOARD_BASIC_AUTH=f"ops:{PASSWORD}")
    board = Dashboard("authapp:app", tmp_path, secret, "--host", "0.0.0.0", "--allow-actions")
    try:
        url = board.url.replace("0.0.0.0", "127.0.0.1")
        assert request(url)[0] == 401
        assert request(url + CANCEL, {"id": "later-1"}, action_headers("", {}))[0] == 401
        token = page_token(url, basic("ops", PASSWORD))
        ok = action_headers(token, basic("ops", PASSWORD))
        assert request(url + CANCEL, {"id": "later-1"}, ok)[0] == 200
        assert status(module) == JobStatus.CANCELLED
    finally:
        board.close()
    assert PASSWORD not in board.log_path.read_text()


def test_bad_access_options_are_one_error_line_without_the_secret(
    module: ModuleType, tmp_path: Path, redis_url: str
) -> None:
    env = env_with(redis_url)
    done = cli("dashboard", "authapp:app", "--basic-auth", PASSWORD, cwd=tmp_path, env=env)
    assert_one_error_line(done, "must be USER:PASSWORD")
    assert PASSWORD not in done.stdout + done.stderr
    bad = env_with(redis_url, RUNNEL_DASHBOARD_BASIC_AUTH=f"{PASSWORD}:")
    done = cli("dashboard", "authapp:app", cwd=tmp_path, env=bad)
    assert_one_error_line(done, "RUNNEL_DASHBOARD_BASIC_AUTH")
    assert PASSWORD not in done.stdout + done.stderr
    done = cli("dashboard", "authapp:app", "--token", " ", cwd=tmp_path, env=env)
    assert_one_error_line(done, "--token")
    nowhere = str(tmp_path / "no" / "such" / "audit.jsonl")
    done = cli("dashboard", "authapp:app", "--audit-log", nowhere, cwd=tmp_path, env=env)
    assert_one_error_line(done, "--audit-log")


def assert_one_error_line(done: Any, *names: str) -> None:
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("Error:"), done.stderr
    for name in names:
        assert name in err, err
