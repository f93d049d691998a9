"""Events trimmed before a processor read them show as "lost N" on the dashboard, in real
headless Chromium: a stream with ``on_full="drop_oldest"`` over its size, whose processor's
consumer group exists but has read nothing."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

from tests.dashboard.test_dashboard import cells, rows
from tests.support.dashboard import Dashboard, import_file, on_page
from tests.support.processes import env_with

SOURCE = """
from runnel import App, Record

app = App(name={name!r})


class Ping(Record):
    n: int


pings = app.stream(
    "pings", record=Ping, partition_by="n", partition_count=1, partition_size=10,
    on_full="drop_oldest",
)


@app.processor(pings)
async def late(events):
    async for _ in events:
        pass
"""


def test_a_partition_that_lost_events_says_how_many(
    tmp_path: Path, redis_url: str, app_name: str, browser: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("RUNNEL_REDIS_URL", redis_url)
    path = tmp_path / "lossy.py"
    path.write_text(textwrap.dedent(SOURCE.format(name=app_name)))
    mod = import_file(path, f"lossy_{app_name}")

    async def fill() -> None:
        partition = mod.pings.partitions[0].id
        try:
            await mod.app.store.log.ensure_group([partition], "late")  # as a worker would
            for n in range(50):
                await mod.pings.send(mod.Ping(n=n))
        finally:
            await mod.app.aclose()

    asyncio.run(fill())
    dashboard = Dashboard("lossy:app", tmp_path, env_with(redis_url))
    try:
        browser.get(dashboard.url)
        [row] = on_page(
            lambda: [cells(r) for r in rows(browser, "tr.partition[data-processor=late]")]
        )
        number, _owner, _state, lag, pending, lost, _failing = row
        assert (number, lag, pending, lost) == ("0", "10", "0", "lost 40")
        assert rows(browser, "tr.partition td.lost")
    finally:
        dashboard.close()
