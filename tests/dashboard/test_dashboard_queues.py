"""The dashboard's job queue section with named queues, in a real browser: a table of the
queues with their counts, and the queues each job executor takes (a real worker process
of tests/jobs/test_job_queues_processes.py's app, and a real `runnel dashboard`).

The page redraws itself every poll, so a row found may be replaced before its cells are
read: each look reads the whole table at once, and looks again if the page changed under
it."""

from __future__ import annotations

from typing import Any

from tests.dashboard.test_dashboard import cells, rows
from tests.jobs.test_job_queues_processes import TARGET, Project, project  # noqa: F401
from tests.support.dashboard import Dashboard
from tests.support.processes import wait_for


def table(driver: Any, selector: str, key: str) -> dict[str, list[str]] | None:
    """{row's ``key`` attribute: its cells} of the rows matching ``selector``; None when
    the page was redrawn while they were read."""
    from selenium.common.exceptions import StaleElementReferenceException

    try:
        return {r.get_attribute(key): cells(r) for r in rows(driver, selector)}
    except StaleElementReferenceException:
        return None


def test_the_page_shows_each_queue_and_what_each_executor_takes(
    project: Project,  # noqa: F811
    browser: Any,
) -> None:
    project.enqueue("urgent", 2)
    project.enqueue("batch", 3)
    project.delay("normal", 1, countdown=3600)
    dashboard = Dashboard(TARGET, project.dir, project.env(), "--sample-every", "0.5")
    try:
        browser.get(dashboard.url)
        # queue, queued, executing, scheduled, next due, dead; declared order
        first = wait_for(lambda: table(browser, "tr.job-queue", "data-queue"))
        assert list(first) == ["critical", "default", "bulk"]
        assert first["critical"] == ["critical", "2", "0", "0", "-", "0"]
        assert first["bulk"] == ["bulk", "3", "0", "0", "-", "0"]
        assert first["default"][1:4] == ["0", "0", "1"]
        assert first["default"][4].startswith("in ")
        worker = project.worker("--queues", "critical")
        project.wait_runs(2)

        def settled() -> tuple[dict[str, list[str]], dict[str, list[str]]] | None:
            queues = table(browser, "tr.job-queue", "data-queue")
            executors = table(browser, "tr.job-executor", "data-id")
            if not queues or not executors or queues["critical"][1] != "0":
                return None
            return queues, executors

        queues, executors = wait_for(settled)
        [executor] = executors.values()
        assert executor[4] == "critical"
        assert queues["bulk"][1] == "3"
        assert project.stop(worker) == 0
    finally:
        dashboard.close()
