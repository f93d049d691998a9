"""The table metrics as a real Prometheus scrapes them from real worker processes: a
worker counts sales per shop in a table and sums them per minute of event time in a
windowed table, with late sales and closed windows; every table metric of
docs/operations.md is there with its labels and the values the events make. A second
worker then takes half the partitions: each partition's table gauges come from its
owner only.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import redis

from tests.support.ports import free_port
from tests.support.processes import WorkerProcess, cli, env_with, wait_for
from tests.support.prometheus import Prometheus, Series, prometheus

HANG = 90
T0 = 1764000000

APP = """
from runnel import App, Record, WindowClosed

app = App(name={name!r})


class Sale(Record):
    shop: str
    at: float
    amount: int


sales = app.stream("sales", record=Sale, partition_by="shop", partition_count=4)
minute_totals = app.stream("minute_totals", record=WindowClosed, partition_by="key")
counts = app.table("counts", source=sales, default=0)
per_minute = app.table("per_minute", source=sales, default=0).tumbling(
    60, time="at", grace=10, expires=3600, on_close=minute_totals
)


@app.processor(sales)
async def tally(events):
    async for sale in events.records():
        counts[sale.shop] += 1
        per_minute[sale.shop] += sale.amount
"""

# (shop, seconds after T0), in the order sent; ada is in partition 3, bob in 0, eve in 1.
SALES = [
    ("ada", 5),
    ("ada", 30),
    ("bob", 42),
    ("eve", 10),
    ("ada", 75),  # ada's watermark passes 60 + 10: [0, 60) closes
    ("eve", 200),  # eve's passes 70: [0, 60) closes
    ("ada", 131),  # ada's passes 120 + 10: [60, 120) closes
    ("ada", 1),  # late: its only window closed
    ("eve", 20),  # late
    ("eve", 100),  # late: [60, 120) ended at 130 + grace, before 200
]
LATE = 3
CLOSED = 3
WATERMARKS = {"0": T0 + 42, "1": T0 + 200, "3": T0 + 131}  # partition 2 has no event
KEYS = {"0": 1, "1": 1, "2": 0, "3": 1}
TABLE_COUNTERS = ("commits", "cache_hits", "cache_misses", "late_events", "windows_closed")


def documented_queries() -> list[str]:
    """The lines of the PromQL example of docs/operations.md that use table metrics."""
    text = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    [block] = re.findall(r"^```promql\n(.*?)^```$", text, re.M | re.S)
    return [line for line in block.splitlines() if "runnel_table_" in line]


def only(series: Series) -> tuple[dict[str, str], float]:
    assert len(series) == 1, series
    return series[0]


def by_partition(server: Prometheus, expr: str) -> dict[str, float]:
    found = server.query(expr)
    return {labels["partition"]: value for labels, value in found}


def test_every_table_metric_as_prometheus_scrapes_it(
    tmp_path: Path, app_name: str, redis_url: str, redis_client: redis.Redis
) -> None:
    (tmp_path / "shopapp.py").write_text(textwrap.dedent(APP.format(name=app_name)))
    lines = [{"shop": s, "at": T0 + t, "amount": 1} for s, t in SALES]
    (tmp_path / "sales.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    env = env_with(redis_url)
    ports = [free_port(), free_port()]
    targets = [f"127.0.0.1:{p}" for p in ports]
    metrics = ("--metrics-port", str(ports[0]), "--metrics-host", "127.0.0.1")
    with (
        prometheus(tmp_path / "prometheus", targets) as server,
        WorkerProcess("shopapp:app", tmp_path, env, *metrics) as first,
    ):
        sent = cli("sendmany", "shopapp:sales", "sales.jsonl", cwd=tmp_path, env=env)
        assert sent.returncode == 0, sent.stderr
        of = f'app="{app_name}",table="per_minute"'

        def scraped() -> bool:
            assert first.proc.poll() is None, first.output
            late = server.query(f"runnel_table_late_events_total{{{of}}}")
            marks = by_partition(server, f"runnel_table_watermark_seconds{{{of}}}")
            return bool(late) and late[0][1] == LATE and marks == WATERMARKS

        wait_for(scraped, HANG, interval=0.5)

        # The counters: per processor and table, with its stream.
        for name in TABLE_COUNTERS:
            for table in ("counts", "per_minute"):
                labels, _ = only(server.query(f'runnel_table_{name}_total{{table="{table}"}}'))
                assert labels == {
                    "__name__": f"runnel_table_{name}_total",
                    "app": app_name,
                    "processor": "tally",
                    "stream": "sales",
                    "table": table,
                    "instance": targets[0],
                    "job": "runnel",
                }
        value = lambda expr: only(server.query(expr))[1]  # noqa: E731
        assert value(f"runnel_table_late_events_total{{{of}}}") == LATE
        assert value(f"runnel_table_windows_closed_total{{{of}}}") == CLOSED
        assert value('runnel_table_late_events_total{table="counts"}') == 0  # no windows
        assert value('runnel_table_windows_closed_total{table="counts"}') == 0
        # As many as the windows emitted to on_close.
        streams = [f"__strm:{app_name}.minute_totals.{n}" for n in range(16)]
        assert sum(redis_client.xlen(s) for s in streams) == CLOSED
        # Each sale reads its shop's count once, from the cache: the worker loaded each
        # shop's count ahead of its first sale, the only reads from Redis.
        assert value('runnel_table_cache_hits_total{table="counts"}') == len(SALES)
        assert value('runnel_table_cache_misses_total{table="counts"}') == 3
        for table in ("counts", "per_minute"):
            commits = value(f'runnel_table_commits_total{{table="{table}"}}')
            assert 1 <= commits <= len(SALES)

        # The gauges: per table and partition, for the partitions the worker owns.
        for table in ("counts", "per_minute"):
            expr = f'runnel_table_keys{{app="{app_name}",table="{table}"}}'
            wait_for(lambda e=expr: by_partition(server, e) == KEYS, HANG, interval=0.5)
            for labels, _ in server.query(expr):
                assert set(labels) == {"__name__", "app", "table", "partition", "instance", "job"}
        assert by_partition(server, f"runnel_table_watermark_seconds{{{of}}}") == WATERMARKS
        assert server.query('runnel_table_watermark_seconds{table="counts"}') == []

        # The PromQL examples of docs/operations.md about tables.
        # increase() needs two samples of a series in its range: wait for the next scrape.
        late_expr, behind_expr = documented_queries()
        tables = {(app_name, "counts"), (app_name, "per_minute")}
        wait_for(
            lambda: {(x["app"], x["table"]) for x, _ in server.query(late_expr)} == tables,
            HANG,
            interval=0.5,
        )
        behind = server.query(behind_expr)
        assert {x["partition"]: x["table"] for x, _ in behind} == dict.fromkeys(
            WATERMARKS, "per_minute"
        )
        assert all(seconds > 0 for _, seconds in behind)  # the sales are of 2025

        # A second worker takes half the partitions: the first stops reporting them.
        metrics = ("--metrics-port", str(ports[1]), "--metrics-host", "127.0.0.1")
        with WorkerProcess("shopapp:app", tmp_path, env, *metrics) as second:

            def split() -> bool:
                assert second.proc.poll() is None, second.output
                owners: dict[str, set[str]] = {}
                for labels, _ in server.query(f'runnel_table_keys{{app="{app_name}"}}'):
                    owners.setdefault(labels["partition"], set()).add(labels["instance"])
                alone = all(len(o) == 1 for o in owners.values())
                both = set().union(*owners.values()) == set(targets)
                return set(owners) == set(KEYS) and alone and both

            wait_for(split, HANG, interval=0.5)
            for table in ("counts", "per_minute"):
                expr = f'runnel_table_keys{{app="{app_name}",table="{table}"}}'
                assert by_partition(server, expr) == KEYS
            assert by_partition(server, f"runnel_table_watermark_seconds{{{of}}}") == WATERMARKS
            assert second.stop() == 0, second.output
        assert first.stop() == 0, first.output
