"""`runnel jobs dead list|replay|purge ... --yes`: API.md gives `[--yes]` for all three.

The dead jobs and the project come from test_cli_jobs.py's fixtures.
"""

from __future__ import annotations

import json

from tests.jobs.test_cli_jobs import APP, JobsProject, assert_ok

# Imported here so that pytest finds these fixtures (``x as x``: used by name only).
from tests.jobs.test_cli_jobs import dead as dead
from tests.jobs.test_cli_jobs import project as project


def test_each_dead_command_takes_yes(dead: JobsProject) -> None:
    """Only purge asks, so --yes changes nothing for list and replay."""
    rows = json.loads(assert_ok(dead.run("jobs", "dead", "list", APP, "--json", "--yes")))
    assert sorted(r["id"] for r in rows) == ["c1", "d1", "d2"]
    done = dead.run("jobs", "dead", "replay", APP, "--id", "d1", "--yes")
    assert assert_ok(done).strip() == "replayed 1 dead job"
    assert dead.status("d1") == "SENT"
    assert "purged 2 dead jobs" in assert_ok(dead.run("jobs", "dead", "purge", APP, "--yes"))
    assert dead.dead_ids() == []
