"""``runnel worker --metrics-port`` and ``--health-port``: a port that cannot be served is
one ``Error:`` line."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.cli.test_cli_errors import assert_one_line_error
from tests.support.cli_app import MODULE, Project
from tests.support.ports import free_port
from tests.support.processes import WorkerProcess, wait_for

APP = f"{MODULE}:app"


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


SERVED = {"metrics": "metrics", "health": "health probes"}
"""What each option serves, as its error names it."""


@pytest.mark.parametrize("which", ["metrics", "health"])
@pytest.mark.parametrize("processes", ["1", "2"])
def test_port_in_use(project: Project, taken_port: int, processes: str, which: str) -> None:
    done = project.run(
        "worker",
        APP,
        "--processes",
        processes,
        f"--{which}-port",
        str(taken_port),
        f"--{which}-host",
        "127.0.0.1",
    )
    err = assert_one_line_error(done, str(taken_port), "in use")
    assert err.startswith(f"Error: cannot serve {SERVED[which]} on 127.0.0.1:{taken_port}")


@pytest.mark.parametrize("which", ["metrics", "health"])
@pytest.mark.parametrize("port", ["0", "65536", "http"])
def test_port_out_of_range(project: Project, port: str, which: str) -> None:
    done = project.run("worker", APP, f"--{which}-port", port)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and f"--{which}-port" in errors[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("which", ["METRICS", "HEALTH"])
def test_setting_out_of_range(project: Project, which: str) -> None:
    variable = f"RUNNEL_{which}_PORT"
    done = project.run("worker", APP, env=project.env_with(**{variable: "70000"}))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    assert f"{variable}='70000'" in lines[0] and "65535" in lines[0], done.stderr


def test_same_port_for_both(project: Project) -> None:
    """One port given to both serves both, once: no error for a port in use by itself."""
    port = str(free_port())
    args = ("--metrics-port", port, "--health-port", port, "--health-host", "127.0.0.1")
    with WorkerProcess(APP, project.dir, project.env, *args, "--metrics-host", "127.0.0.1") as w:
        wait_for(lambda: status(int(port), "/readyz") == 200, 60)
        assert status(int(port), "/metrics") == 200
        assert w.stop() == 0, w.output


def status(port: int, path: str) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None
