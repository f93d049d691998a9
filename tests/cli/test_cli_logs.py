"""`runnel worker` configures logging for the whole process: the app's own loggers too."""

from __future__ import annotations

import json
import re
import textwrap

from tests.support.cli_app import Project
from tests.support.processes import WorkerProcess, wait_for

TIMER_APP = """
import logging

from runnel import App

app = App(name={name!r})
log = logging.getLogger("myapp.timer")


@app.timer(interval=0.05)
async def tick():
    log.info("tick info")
    log.warning("tick warning")
    log.debug("tick debug")
"""

CONSOLE_LINE = r"^\d\d:\d\d:\d\d (?P<level>[A-Z]+) +myapp\.timer: tick (?P<what>\w+)$"


def write_timer_app(project: Project) -> str:
    (project.dir / "timerapp.py").write_text(
        textwrap.dedent(TIMER_APP.format(name=project.app_name))
    )
    return "timerapp:app"


def test_app_loggers_appear_with_time_and_level(project: Project) -> None:
    target = write_timer_app(project)
    with WorkerProcess(target, project.dir, project.env) as worker:
        wait_for(lambda: "tick warning" in worker.output and "tick info" in worker.output)
        assert worker.stop() == 0
    lines = [m for m in re.finditer(CONSOLE_LINE, worker.output, re.M)]
    assert {(m["level"], m["what"]) for m in lines} == {("INFO", "info"), ("WARNING", "warning")}


def test_log_level_option_overrides_the_setting(project: Project) -> None:
    target = write_timer_app(project)
    env = project.env_with(RUNNEL_LOG_LEVEL="warning")
    with WorkerProcess(target, project.dir, env, "--log-level", "DEBUG") as worker:
        wait_for(lambda: "tick debug" in worker.output)
        assert worker.stop() == 0
    assert re.search(r"^\S+ DEBUG +myapp\.timer: tick debug$", worker.output, re.M)


def test_setting_level_hides_lower_lines(project: Project) -> None:
    target = write_timer_app(project)
    env = project.env_with(RUNNEL_LOG_LEVEL="warning")
    with WorkerProcess(target, project.dir, env) as worker:
        wait_for(lambda: worker.output.count("tick warning") >= 3)
        assert worker.stop() == 0
    assert "tick info" not in worker.output


def test_json_format_gives_parseable_lines_naming_the_logger(project: Project) -> None:
    target = write_timer_app(project)
    with WorkerProcess(target, project.dir, project.env, "--log-format", "json") as worker:
        wait_for(lambda: "tick warning" in worker.output and "tick info" in worker.output)
        assert worker.stop() == 0
    records = [json.loads(line) for line in worker.output.splitlines() if line.strip()]
    mine = [r for r in records if r["logger"] == "myapp.timer"]
    assert {(r["level"], r["message"]) for r in mine} == {
        ("info", "tick info"),
        ("warning", "tick warning"),
    }
    assert all(r["time"] for r in mine)
    assert any(r["logger"].startswith("runnel") for r in records)


def test_bad_log_level_is_one_error_line(project: Project) -> None:
    result = project.run("worker", write_timer_app(project), "--log-level", "loud")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "Error:" in result.stderr
