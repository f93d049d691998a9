"""examples/demo.py (`hatch run demo:run`) in a project of its own: it runs the example
app end to end on the embedded server, and what it says of that server is true: a server
it started, it says it stops, and it does stop it; one already running it leaves."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from runnel_redis import embedded

ROOT = Path(__file__).parents[2]


def demo_project(tmp_path: Path) -> Path:
    (tmp_path / "examples").mkdir()
    for name in ("demo.py", "orders.py"):
        shutil.copy(ROOT / "examples" / name, tmp_path / "examples" / name)
    (tmp_path / "pyproject.toml").write_text("")  # the project the embedded server is for
    return tmp_path


def run_demo(project: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNNEL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "examples/demo.py", "5"],
        cwd=project,
        env={**env, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_the_demo_stops_the_server_it_says_it_stops(tmp_path: Path) -> None:
    project = demo_project(tmp_path)
    directory = project / ".runnel" / "redis"
    try:
        done = run_demo(project)
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "processed 5 of 5 orders, each once, in order per customer" in done.stdout
        [started] = [line for line in done.stderr.splitlines() if line.startswith("started ")]
        assert started.endswith(f"(data in {directory}; this demo stops it when done)")
        assert "runnel embedded stop" not in done.stdout + done.stderr
        assert "(stopped the embedded redis-server this demo started)" in done.stdout.splitlines()
        assert embedded.running(directory) is None

        # A server already running is the user's: the demo neither announces nor stops it.
        server = embedded.ensure(f"redis+embedded://{project}")
        done = run_demo(project)
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "started " not in done.stderr and "stopped " not in done.stdout
        assert embedded.running(directory) == server
    finally:
        embedded.stop(directory)
