"""`runnel worker` pauses the garbage collector while it starts, and runs with it on:
every start-up object frozen out of its passes (runnel.runtime.heap)."""

from __future__ import annotations

import textwrap

from tests.support.cli_app import Project
from tests.support.processes import WorkerProcess, wait_for

GC_APP = """
import gc

from runnel import App

print("importing: collector", "on" if gc.isenabled() else "off", flush=True)
app = App(name={name!r})


@app.timer(interval=0.05)
async def tick():
    on = "on" if gc.isenabled() else "off"
    print("running: collector", on, "frozen", gc.get_freeze_count() > 0, flush=True)
"""


def test_the_collector_is_paused_at_start_and_on_while_running(project: Project) -> None:
    (project.dir / "gcapp.py").write_text(textwrap.dedent(GC_APP.format(name=project.app_name)))
    with WorkerProcess("gcapp:app", project.dir, project.env) as worker:
        wait_for(lambda: "running:" in worker.output)
        assert worker.stop() == 0
    assert "importing: collector off" in worker.output
    assert "running: collector on frozen True" in worker.output


def test_with_gc_freeze_off_the_collector_runs_and_nothing_is_frozen(project: Project) -> None:
    (project.dir / "gcapp.py").write_text(textwrap.dedent(GC_APP.format(name=project.app_name)))
    env = {**project.env, "RUNNEL_GC_FREEZE": "false"}
    with WorkerProcess("gcapp:app", project.dir, env) as worker:
        wait_for(lambda: "running:" in worker.output)
        assert worker.stop() == 0
    assert "running: collector on frozen False" in worker.output
