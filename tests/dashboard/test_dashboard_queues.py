"""The dashboard's job queue section with named queues, in a real browser: a table of the
queues with their counts, and the queues each job executor takes (a real worker process
of tests/jobs/test_job_queues_processes.py's app, and a real `runnel dashboard`)."""

from __future__ import annotations

from typing import Any

from tests.dashboard.test_dashboard import cells, rows
from tests.jobs.test_job_queues_processes import TARGET, Project, project  # noqa: F401
from tests.support.dashboard import Dashboard
from tests.support.processes import wait_for


def queues_shown(driver: Any) -> dict[str, list[str]]:
    return {r.get_attribute("data-queue"): cells(r)[1:] for r in rows(driver, "tr.job-queue")}


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
        # queued, executing, scheduled, next due, dead; declared order, default included
        first = wait_for(lambda: queues_shown(browser))
        assert list(first) == ["critical", "default", "bulk"]
        assert first["critical"] == ["2", "0", "0", "-", "0"]
        assert first["bulk"] == ["3", "0", "0", "-", "0"]
        assert first["default"][:3] == ["0", "0", "1"] and first["default"][3].startswith("in ")
        worker = project.worker("--queues", "critical")
        project.wait_runs(2)

        def settled() -> list[Any] | None:
            shown = queues_shown(browser)
            found = rows(browser, "tr.job-executor")
            return found if shown.get("critical", [""])[0] == "0" and found else None

        [executor] = wait_for(settled)
        assert cells(executor)[4] == "critical"
        assert queues_shown(browser)["bulk"][0] == "3"
        assert project.stop(worker) == 0
    finally:
        dashboard.close()
