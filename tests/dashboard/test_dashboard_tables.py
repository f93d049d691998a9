"""The dashboard's Tables section in a real browser: a real worker process counts sales
per shop in a table and sums them per minute of event time in a windowed table, some of
them late; headless Chromium loads a real `runnel dashboard` process. The section shows
each table's keys per partition, and for the windowed one its windows, each partition's
watermark and late events (in red when there are any), as `runnel table list` reports.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from tests.support.dashboard import Dashboard, on_page
from tests.support.processes import WorkerProcess, cli, env_with

T0 = 1764000000
INK, BAD = "rgba(29, 35, 48, 1)", "rgba(192, 54, 44, 1)"  # style.css: --ink, --bad

APP = """
from runnel import App, Record

app = App(name={name!r}, default_join_delay=0)


class Sale(Record):
    shop: str
    at: float
    amount: int


sales = app.stream("sales", record=Sale, partition_by="shop", partition_count=4)
counts = app.table("counts", source=sales, default=0)
per_minute = app.table("per_minute", source=sales, default=0).tumbling(
    60, time="at", grace=10, expires=3600
)


@app.processor(sales)
async def tally(events):
    async for sale in events.records():
        counts[sale.shop] += 1
        per_minute[sale.shop] += sale.amount
"""

# (shop, seconds after T0) in the order sent: ada is in partition 3, bob in 0, eve in 1.
SALES = [
    ("ada", 5),
    ("bob", 42),
    ("eve", 10),
    ("ada", 131),
    ("eve", 200),
    ("ada", 1),  # late: its minute closed at 70
    ("eve", 20),  # late
    ("eve", 100),  # late: [60, 120) closed at 130
]


def rows(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def cells(row: Any, tag: str = "td") -> list[str]:
    from selenium.webdriver.common.by import By

    return [td.text for td in row.find_elements(By.TAG_NAME, tag)]


def partitions(driver: Any, table: str) -> list[list[str]]:
    return [cells(r) for r in rows(driver, f"tr.table-partition[data-table={table}]")]


def screenshot(driver: Any, selector: str, path: Path) -> bool:
    [section] = rows(driver, selector)
    driver.execute_script("arguments[0].scrollIntoView()", section)
    return bool(section.screenshot(str(path)))


def test_the_tables_section_shows_windows_watermarks_and_late_events(
    tmp_path: Path, app_name: str, redis_url: str, browser: Any
) -> None:
    (tmp_path / "shopapp.py").write_text(textwrap.dedent(APP.format(name=app_name)))
    lines = [{"shop": s, "at": T0 + t, "amount": 1} for s, t in SALES]
    (tmp_path / "sales.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    env = env_with(redis_url)
    with WorkerProcess("shopapp:app", tmp_path, env) as worker:
        sent = cli("sendmany", "shopapp:sales", "sales.jsonl", cwd=tmp_path, env=env)
        assert sent.returncode == 0, sent.stderr
        dashboard = Dashboard("shopapp:app", tmp_path, env, "--sample-every", "0.5")
        try:
            browser.get(dashboard.url)
            want = [
                ["0", "1", str(T0 + 42), "0"],
                ["1", "1", str(T0 + 200), "2"],
                ["2", "0", "-", "0"],
                ["3", "1", str(T0 + 131), "1"],
            ]
            on_page(lambda: partitions(browser, "per_minute") == want, 60)
            assert on_page(lambda: rows(browser, "#tables-section")[0].is_displayed())

            windowed = ".state-table[data-name=per_minute]"
            heading = on_page(lambda: rows(browser, f"{windowed} h3")[0].text)
            assert heading == "per_minute of stream sales, 3 keys"
            shape = on_page(lambda: rows(browser, f"{windowed} p.windows")[0].text)
            assert shape == "tumbling windows (size 60, grace 10, expires 3600); late events 3"
            head = on_page(lambda: cells(rows(browser, f"{windowed} thead tr")[0], "th"))
            assert head == ["partition", "keys", "watermark", "late events"]
            late = on_page(
                lambda: {
                    td.text: td.value_of_css_property("color")
                    for td in rows(browser, f"{windowed} td.late")
                }
            )
            assert late == {"0": INK, "1": BAD, "2": BAD}  # red: partitions 1 and 3

            # The plain table: keys per partition only.
            counts = on_page(lambda: partitions(browser, "counts"))
            assert counts == [["0", "1"], ["1", "1"], ["2", "0"], ["3", "1"]]
            head = on_page(
                lambda: cells(rows(browser, ".state-table[data-name=counts] thead tr")[0], "th")
            )
            assert head == ["partition", "keys"]
            assert rows(browser, ".state-table[data-name=counts] p.windows") == []

            # What the page shows is what `runnel table list` says.
            listed = cli("table", "list", "shopapp:app", "--json", cwd=tmp_path, env=env)
            [_, report] = json.loads(listed.stdout)["tables"]
            assert [
                (p["number"], p["keys"], p["watermark"], p["late"]) for p in report["partitions"]
            ] == [(0, 1, T0 + 42, 0), (1, 1, T0 + 200, 2), (2, 0, None, 0), (3, 1, T0 + 131, 1)]

            shot = tmp_path / "tables.png"
            on_page(lambda: screenshot(browser, "#tables-section", shot))
            assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        finally:
            dashboard.close()
        assert worker.stop() == 0, worker.output
