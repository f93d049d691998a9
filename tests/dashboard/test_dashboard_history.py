"""The history charts outlive the dashboard: samples are kept in the store, so a
dashboard started again (real processes, real Redis) draws the samples the one before it
took, in real headless Chromium; and the kept history stays within its bound while two
dashboards sample the same app at once."""

from __future__ import annotations

import json
import textwrap
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runnel.store.backend import admin_of
from runnel_dashboard.history import bound, capacity, partition
from tests.dashboard.test_dashboard import rows
from tests.support.dashboard import Dashboard, import_file, run_then_close
from tests.support.processes import cli, env_with, wait_for

MODULE = "historyapp"
TARGET = f"{MODULE}:app"

SOURCE = """
from runnel import App, Record

app = App(name={name!r})


class Ping(Record):
    key: str


pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)


@app.processor(pings)
async def tally(events):
    async for _ in events:
        pass
"""


@pytest.fixture
def module(
    tmp_path: Path, app_name: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> ModuleType:
    monkeypatch.setenv("RUNNEL_REDIS_URL", redis_url)
    path = tmp_path / f"{MODULE}.py"
    path.write_text(textwrap.dedent(SOURCE.format(name=app_name)))
    mod = import_file(path, f"{MODULE}_{app_name}")
    return mod


run = run_then_close


def history(dashboard: Dashboard, span: str = "1h") -> dict[str, Any]:
    with urllib.request.urlopen(f"{dashboard.url}api/history?span={span}", timeout=30) as answer:
        return dict(json.loads(answer.read()))


def stored(mod: ModuleType) -> list[bytes]:
    """The ids of the samples in the store, oldest first."""

    async def scan() -> list[bytes]:
        entries = await admin_of(mod.app.store).scan(partition(mod.app.name), None, 10_000)
        return [entry_id for entry_id, _ in entries]

    return list(run(mod, scan))


def test_the_charts_show_the_samples_of_a_dashboard_started_before(
    module: ModuleType, tmp_path: Path, redis_url: str, browser: Any
) -> None:
    mod = module

    async def send() -> None:
        for key in "abcde":  # no worker: five events wait, the backlog is 5
            await mod.pings.send(mod.Ping(key=key))
        await mod.app.store.log.ensure_group([p.id for p in mod.pings.partitions], "tally")

    run(mod, send)
    env = env_with(redis_url)
    first = Dashboard(TARGET, tmp_path, env, "--sample-every", "0.3")
    try:

        def four() -> list[dict[str, Any]] | None:
            samples: list[dict[str, Any]] = history(first)["samples"]
            return samples if len(samples) >= 4 else None

        earlier = wait_for(four)
    finally:
        first.close()
    times = [s["at"] for s in earlier]
    assert all(s["backlog"] == {"tally": 5} for s in earlier)

    again = Dashboard(TARGET, tmp_path, env, "--sample-every", "0.3")
    try:
        assert set(times) <= {s["at"] for s in history(again)["samples"]}
        with pytest.raises(urllib.error.HTTPError) as refused:
            history(again, span="2d")
        assert refused.value.code == 400
        assert json.loads(refused.value.read()) == {"error": "span must be one of 1h, 6h, 24h"}
        browser.get(again.url)
        box = wait_for(lambda: rows(browser, "#history[data-first]:not([data-first=''])"))[0]
        assert float(box.get_attribute("data-first")) == times[0]
        charts = browser.execute_script(
            "return [...document.querySelectorAll('.history-chart')].map((f) => ({"
            "title: f.dataset.title,"
            "x: [...f.querySelectorAll('text.tick.x')].map((t) => t.textContent),"
            "y: [...f.querySelectorAll('text.tick.y')].map((t) => t.textContent),"
            "lines: f.querySelectorAll('polyline.series').length,"
            "legend: [...f.querySelectorAll('.legend li')].map((l) => l.textContent)}))"
        )
        by_title = {c["title"]: c for c in charts}
        assert set(by_title) >= {
            "Throughput per processor",
            "Backlog per processor",
            "Lag per processor",
            "Failures",
        }
        backlog = by_title["Backlog per processor"]
        assert backlog["legend"] == ["tally: 5"]
        assert backlog["lines"] >= 1
        assert len(backlog["x"]) == 5 and all(":" in t for t in backlog["x"])
        assert backlog["y"][0] == "0" and len(backlog["y"]) == 3
    finally:
        again.close()


def test_the_history_keeps_its_bound_with_two_dashboards_sampling(
    module: ModuleType, tmp_path: Path, redis_url: str
) -> None:
    mod = module
    every, hours = 0.2, 0.001
    keep, most = capacity(every, hours), bound(every, hours)
    options = ("--sample-every", str(every), "--history-hours", str(hours))
    env = env_with(redis_url)
    elsewhere = tmp_path / "second"  # a log file of its own
    elsewhere.mkdir()
    (elsewhere / f"{MODULE}.py").write_text((tmp_path / f"{MODULE}.py").read_text())
    one = Dashboard(TARGET, elsewhere, env, *options)
    two = Dashboard(TARGET, tmp_path, env, *options)
    try:
        oldest = wait_for(lambda: stored(mod))[0]
        buckets = int(every * 1000)

        def gone_round_twice() -> bool:
            ids = stored(mod)
            assert len(ids) <= most  # at every look, not only at the end
            # One sample per bucket, whichever dashboard wrote it.
            millis = [int(i.split(b"-")[0]) for i in ids]
            assert all(m % buckets == 0 for m in millis) and len(set(millis)) == len(ids)
            return (millis[-1] - int(oldest.split(b"-")[0])) >= 2 * keep * buckets

        wait_for(gone_round_twice, timeout=120)
        assert oldest not in stored(mod)  # the oldest went
        answer = history(two)
        assert answer["bound"] == most and len(answer["samples"]) <= most
    finally:
        one.close()
        two.close()
    assert "Traceback" not in one.log_path.read_text() + two.log_path.read_text()


def test_a_bad_history_span_is_a_usage_error(
    module: ModuleType, tmp_path: Path, redis_url: str
) -> None:
    """As every wrong command line (docs/cli.md): exit 2, click's usage and one Error: line."""
    done = cli("dashboard", TARGET, "--history-hours", "0", cwd=tmp_path, env=env_with(redis_url))
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [
        "Error: Invalid value for '--history-hours': 0.0 is not in the range 0.001<=x<=744."
    ]
