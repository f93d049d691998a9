"""Wrong credentials and missing ACL permissions: one Error line, a non-zero exit, and the
password nowhere in what is printed, for one-shot commands and a real worker process."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from runnel.runtime.supervisor import REFUSED
from runnel_redis.embedded import Server
from tests.cli.test_cli_errors import assert_one_line_error
from tests.support.cli_app import MODULE, write_app
from tests.support.ports import start_redis
from tests.support.processes import WorkerProcess, cli, env_with

ADMIN_PASSWORD = "admin-Pw-4c1d"
WRONG_PASSWORD = "wrong-Pw-9f2e"
BOB_PASSWORD = "bob-Pw-77aa"
STREAM = f"{MODULE}:pings"
APP = f"{MODULE}:app"
EVENT = '{"key": "a", "n": 1}'


@pytest.fixture(scope="module")
def locked_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A redis-server with `requirepass`, and ACL users each lacking one command."""
    server = start_redis(tmp_path_factory.mktemp("locked"), persist=False)
    admin = redis.Redis(port=server.port)
    admin.acl_setuser(
        "noread",
        enabled=True,
        passwords=[f"+{BOB_PASSWORD}"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-xreadgroup"],
    )
    admin.acl_setuser(
        "noscripts",
        enabled=True,
        passwords=[f"+{BOB_PASSWORD}"],
        keys=["*"],
        channels=["*"],
        commands=["+@all", "-evalsha", "-eval"],
    )
    admin.config_set("requirepass", ADMIN_PASSWORD)
    admin.close()
    yield server
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGTERM)


def url(server: Server, user: str = "", password: str = "") -> str:
    return f"redis://{user}:{password}@127.0.0.1:{server.port}/0"


@pytest.fixture
def project(tmp_path: Path, app_name: str) -> Path:
    write_app(tmp_path, app_name, partitions=2)
    return tmp_path


def assert_no_password(*texts: str) -> None:
    for text in texts:
        for secret in (WRONG_PASSWORD, ADMIN_PASSWORD, BOB_PASSWORD):
            assert secret not in text, text


@pytest.mark.parametrize(
    "command",
    [
        ("send", STREAM, EVENT),
        ("status", APP),
        ("jobs", "info", APP),
        ("jobs", "dead", "list", APP),
        ("processor", "reset", f"{MODULE}:a"),
        ("dead", "list", STREAM),
    ],
    ids=["send", "status", "jobs-info", "jobs-dead-list", "processor-reset", "dead-list"],
)
def test_wrong_password(locked_server: Server, project: Path, command: tuple[str, ...]) -> None:
    done = cli(*command, cwd=project, env=env_with(url(locked_server, "", WRONG_PASSWORD)))
    err = assert_one_line_error(done, "authentication failed", "'default'", "***")
    assert_no_password(done.stdout, err)


def test_no_password(locked_server: Server, project: Path) -> None:
    done = cli(
        "send",
        STREAM,
        EVENT,
        cwd=project,
        env=env_with(f"redis://127.0.0.1:{locked_server.port}/0"),
    )
    err = assert_one_line_error(done, "authentication failed", "requires a password")
    assert "HELLO" not in err and "NOAUTH" not in err, err  # Redis's raw reply, translated


def test_no_password_stops_the_worker_with_one_clear_line(
    locked_server: Server, project: Path
) -> None:
    env = env_with(f"redis://127.0.0.1:{locked_server.port}/0")
    with WorkerProcess(APP, project, env) as worker:
        code = worker.proc.wait(60)
        output = worker.output
    assert code == REFUSED
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "requires a password and the URL gives none" in errors[0], output
    assert "HELLO" not in output and "Traceback" not in output, output


def test_worker_with_wrong_password_stops(locked_server: Server, project: Path) -> None:
    env = env_with(url(locked_server, "bob", WRONG_PASSWORD))
    with WorkerProcess(APP, project, env) as worker:
        code = worker.proc.wait(60)
        output = worker.output
    assert code == REFUSED
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert errors == [errors[0]] and "authentication failed for user 'bob'" in errors[0], output
    assert "bob:***@" in errors[0]
    assert "Traceback" not in output
    assert_no_password(output)


@pytest.mark.parametrize(
    "user,command", [("noread", "XREADGROUP"), ("noscripts", "EVAL")], ids=["xreadgroup", "scripts"]
)
def test_worker_missing_permission_stops(
    locked_server: Server, project: Path, user: str, command: str
) -> None:
    env = env_with(url(locked_server, user, BOB_PASSWORD))
    with WorkerProcess(APP, project, env) as worker:
        code = worker.proc.wait(60)
        output = worker.output
    assert code != 0
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, output
    assert f"user '{user}' may not run {command}" in errors[0]
    assert "Traceback" not in output
    assert_no_password(output)


def test_supervisor_does_not_restart_a_refused_worker(locked_server: Server, project: Path) -> None:
    """Under ``--processes``, a child refused by Redis would be refused again: the
    supervisor stops the others and exits with the same code, instead of restarting it
    forever."""
    env = env_with(url(locked_server, "bob", WRONG_PASSWORD))
    with WorkerProcess(APP, project, env, "--processes", "2") as worker:
        code = worker.proc.wait(60)
        output = worker.output
    assert code == REFUSED, output
    assert "restarting it" not in output, output
    assert "authentication failed for user 'bob'" in output
    assert "Traceback" not in output
    assert_no_password(output)
