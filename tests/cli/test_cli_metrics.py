"""``runnel worker --metrics-port``: a port that cannot be served is one ``Error:`` line."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.cli.test_cli_errors import assert_one_line_error
from tests.support.cli_app import MODULE, Project

APP = f"{MODULE}:app"


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize("processes", ["1", "2"])
def test_port_in_use(project: Project, taken_port: int, processes: str) -> None:
    done = project.run(
        "worker",
        APP,
        "--processes",
        processes,
        "--metrics-port",
        str(taken_port),
        "--metrics-host",
        "127.0.0.1",
    )
    err = assert_one_line_error(done, str(taken_port), "in use")
    assert err.startswith("Error: cannot serve metrics")


@pytest.mark.parametrize("port", ["0", "65536", "http"])
def test_port_out_of_range(project: Project, port: str) -> None:
    done = project.run("worker", APP, "--metrics-port", port)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "--metrics-port" in errors[0], done.stderr
    assert "Traceback" not in done.stderr


def test_setting_out_of_range(project: Project) -> None:
    done = project.run("worker", APP, env=project.env_with(RUNNEL_METRICS_PORT="70000"))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    assert "RUNNEL_METRICS_PORT='70000'" in lines[0] and "65535" in lines[0], done.stderr
