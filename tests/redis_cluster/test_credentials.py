"""Wrong credentials on a Redis Cluster: the same one ``Error:`` line as on a single Redis.

redis-py's cluster client parses no refusals itself (it takes no parser class) and wraps a
refused login in its own "cannot connect" error; the seam finds the refusal and raises
``AccessDenied``. The cluster here is this module's own: 3 masters with ``requirepass``
(set once the cluster is formed; the cluster bus needs no password).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runnel.runtime.supervisor import REFUSED
from tests.cli.test_cli_errors import assert_one_line_error
from tests.support.cli_app import MODULE, write_app
from tests.support.processes import WorkerProcess, cli, env_with
from tests.support.redis_cluster import RedisClusterProcesses, missing_tools, start_cluster

PASSWORD = "cluster-Pw-5b0e"
WRONG = "wrong-Pw-31c7"
STREAM = f"{MODULE}:pings"
APP = f"{MODULE}:app"
EVENT = '{"key": "a", "n": 1}'


@pytest.fixture(scope="module")
def locked_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterProcesses]:
    if reason := missing_tools():
        pytest.skip(reason)
    with start_cluster(tmp_path_factory.mktemp("locked-cluster"), masters=3) as cluster:
        for node in cluster.nodes:  # ACL users are per node
            node.command(
                "ACL", "SETUSER", "noread", "on", f">{PASSWORD}", "~*", "&*", "+@all", "-xreadgroup"
            )
            node.command("CONFIG", "SET", "requirepass", PASSWORD)
        yield cluster


def url(cluster: RedisClusterProcesses, password: str | None, user: str = "") -> str:
    login = f"{user}:{password}@" if password is not None else ""
    return cluster.url.replace("redis+cluster://", f"redis+cluster://{login}", 1)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_app(tmp_path, f"c{uuid.uuid4().hex[:8]}", partitions=2)
    return tmp_path


@pytest.mark.parametrize(
    "command", [("send", STREAM, EVENT), ("status", APP)], ids=["send", "status"]
)
def test_wrong_password(
    locked_cluster: RedisClusterProcesses, project: Path, command: tuple[str, ...]
) -> None:
    done = cli(*command, cwd=project, env=env_with(url(locked_cluster, WRONG)))
    assert_one_line_error(done, "authentication failed for user 'default'", "***")
    assert WRONG not in done.stdout + done.stderr


def test_no_password(locked_cluster: RedisClusterProcesses, project: Path) -> None:
    done = cli("send", STREAM, EVENT, cwd=project, env=env_with(url(locked_cluster, None)))
    assert_one_line_error(done, "authentication failed for user 'default'")


def test_right_password_sends(locked_cluster: RedisClusterProcesses, project: Path) -> None:
    done = cli("send", STREAM, EVENT, cwd=project, env=env_with(url(locked_cluster, PASSWORD)))
    assert done.returncode == 0, done.stderr


def test_worker_with_wrong_password_stops(
    locked_cluster: RedisClusterProcesses, project: Path
) -> None:
    with WorkerProcess(APP, project, env_with(url(locked_cluster, WRONG))) as worker:
        code = worker.proc.wait(60)
        output = worker.output
    assert code == REFUSED, output
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert errors == [errors[0]] and "authentication failed for user 'default'" in errors[0]
    assert "Traceback" not in output and WRONG not in output


def test_worker_missing_permission_stops(
    locked_cluster: RedisClusterProcesses, project: Path
) -> None:
    env = env_with(url(locked_cluster, PASSWORD, "noread"))
    with WorkerProcess(APP, project, env) as worker:
        code = worker.proc.wait(60)
        output = worker.output
    assert code != 0
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, output
    # The cluster fetcher reads inside scripts; Redis does not name the command refused there.
    assert "user 'noread' may not run" in errors[0], output
    assert "Traceback" not in output and PASSWORD not in output
