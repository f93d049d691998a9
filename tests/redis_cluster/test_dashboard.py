"""`runnel dashboard` pointed at a 3-master cluster, in real headless Chromium: an app
whose partitions lie on every master, a real worker process, events with lag left on
every master (a processor the worker does not run) and a dead job. The page shows every
partition with its owner and lag, the stream's size, and the dead job."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from runnel.jobs.model import JobStatus
from tests.dashboard.test_dashboard import APP_SOURCE, cells, rows
from tests.support.dashboard import Dashboard, browser, on_page  # noqa: F401
from tests.support.processes import WorkerProcess, wait_for
from tests.support.spread import SpreadApp, spread_fixture

LONG = 120.0  # only bounds a hung test
PARTITIONS = 6
# The dashboard tests' app, with a processor the worker does not run (its lag stays).
APP = (
    APP_SOURCE
    + """

@app.processor(pings)
async def idle(events):
    async for ping in events.records():
        pass
"""
)


spread = spread_fixture(APP, "dashapp", PARTITIONS)


def job_status(spread: SpreadApp, job_id: str) -> JobStatus:
    app = spread.module.app

    async def go() -> JobStatus:
        try:
            return await app.job_store.status(job_id)
        finally:
            await app.aclose()

    return asyncio.run(go())


def shown(driver: Any, processor: str) -> dict[int, list[str]] | None:
    """{partition: [owner, state, lag, pending, failing id]} once all are on the page."""
    found = {}
    for row in rows(driver, f"tr.partition[data-processor={processor}]"):
        number, *rest = cells(row)
        found[int(number)] = rest
    return found if len(found) == PARTITIONS else None


def test_the_page_shows_an_app_spread_over_three_masters(
    spread: SpreadApp,
    browser: Any,  # noqa: F811
) -> None:
    keys = spread.key_per_partition()
    per_partition = {n: 2 + n for n in range(PARTITIONS)}  # a different count on each
    lines = "".join(
        json.dumps({"key": keys[n], "n": i}) + "\n"
        for n, count in per_partition.items()
        for i in range(count)
    )
    total = sum(per_partition.values())
    sent = spread.run("sendmany", spread.target("pings"), "-", input=lines)
    assert sent.returncode == 0, sent.stderr
    done = spread.run("jobs", "send", spread.target("fail"), '["boom"]', "--job-id", "doomed")
    assert done.returncode == 0, done.stderr

    with WorkerProcess(spread.target("app"), spread.dir, spread.env, "--processors", "tally") as w:
        wait_for(lambda: job_status(spread, "doomed") == JobStatus.DEAD, timeout=LONG)
        dashboard = Dashboard(spread.target("app"), spread.dir, spread.env, "--sample-every", "0.5")
        try:
            browser.get(dashboard.url)

            def tally_drained() -> dict[int, list[str]] | None:
                found = shown(browser, "tally")
                done = found and all(r[0] != "-" and r[2] == "0" for r in found.values())
                return found if done else None

            tally = on_page(tally_drained, timeout=LONG)
            [owner] = on_page(
                lambda: [r.get_attribute("data-id") for r in rows(browser, "tr.executor")]
            )
            assert {n: r[:3] for n, r in tally.items()} == {
                n: [owner, "owned", "0"] for n in range(PARTITIONS)
            }
            idle = on_page(lambda: shown(browser, "idle"), timeout=LONG)
            # Nobody runs idle: every event is lag, partition by partition, on all masters.
            assert {n: r[2] for n, r in idle.items()} == {
                n: str(count) for n, count in per_partition.items()
            }
            assert set(spread.masters().values()) == {m.port for m in spread.cluster.masters()}
            heading = on_page(lambda: rows(browser, ".processor[data-name=tally] h3")[0].text)
            assert heading == f"tally stream pings, {total} events stored"
            [dead] = on_page(
                lambda: [cells(r) for r in rows(browser, "tr.dead[data-id=doomed]")], timeout=LONG
            )
            assert dead[1:4] == ["doomed", "fail", "ValueError: failing on purpose: boom"]
            assert on_page(lambda: rows(browser, "[data-count=dead] b")[0].text) == "1"
        finally:
            dashboard.close()
        assert w.stop() == 0, w.output
