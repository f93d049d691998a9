"""A real Prometheus scraping a real `runnel worker --metrics-port`, with the shipped alert
rules (docs/prometheus/alerts.yml) loaded: PromQL answers the lag and processed totals the
test caused, the quarantine, dead letters, failures and a worker gone fire their alerts,
and every expression of the Grafana dashboard (docs/grafana/runnel.json) parses.

Everything polls until the value is there; the timeouts only guard against a hang.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.ports import free_port
from tests.support.processes import WorkerProcess, cli, env_with, wait_for
from tests.support.prometheus import ALERTS, DASHBOARD, Prometheus, prometheus

HANG = 120
GOOD = 20  # events spread over every partition, processed at once
WAITING = 7  # events sent behind the quarantined one: the lag

APP = """
from runnel import App, ExceptionPolicy, Record

app = App(name={name!r})


class Order(Record):
    key: str
    n: int


orders = app.stream("orders", record=Order, partition_by="key", partition_count=4)


@app.processor(orders, exception_policy=ExceptionPolicy.QUARANTINE)
async def charge(events):
    async for order in events.records():
        if order.n < 0:
            raise ValueError("a negative order")


@app.job(retries=0)
async def doomed():
    raise RuntimeError("always")
"""


def value(server: Prometheus, expr: str) -> float | None:
    """The single value of ``expr``, or None while it has none."""
    found = server.query(expr)
    assert len(found) <= 1, found
    return found[0][1] if found else None


def firing(server: Prometheus, name: str, state: str = "firing") -> list[dict[str, str]]:
    """The labels of each alert ``name`` in ``state``."""
    return [
        a["labels"]
        for a in server.alerts()
        if a["labels"]["alertname"] == name and a["state"] == state
    ]


def dashboard_queries() -> list[str]:
    """The dashboard's panel queries, with its variables given values (every app, ...)."""
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    fill = {"$__rate_interval": "1m", "$app": ".*", "$processor": ".*", "$job_name": ".*"}
    fill["$queue"] = ".*"
    out = []
    for expr in exprs:
        for var, text in fill.items():
            expr = expr.replace(var, text)
        assert "$" not in expr, expr
        # label_values() is Grafana's: its inner selector is the PromQL.
        if expr.startswith("label_values("):
            expr = expr.removeprefix("label_values(").rsplit(",", 1)[0]
        out.append(expr)
    return out


def documented_queries() -> list[str]:
    """The expressions of the PromQL example of docs/operations.md (an indented line
    goes on the one before it)."""
    text = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    [block] = re.findall(r"^```promql\n(.*?)^```$", text, re.M | re.S)
    exprs: list[str] = []
    for line in block.splitlines():
        if line.startswith(" ") and exprs:
            exprs[-1] += "\n" + line
        elif line and not line.startswith("#"):
            exprs.append(line)
    return exprs


def test_prometheus_answers_what_the_worker_did(
    tmp_path: Path, app_name: str, redis_url: str
) -> None:
    (tmp_path / "shop.py").write_text(textwrap.dedent(APP.format(name=app_name)))
    lines = [{"key": f"k{i}", "n": i} for i in range(GOOD)]
    (tmp_path / "good.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    waiting = [{"key": "poisoned", "n": i} for i in range(WAITING)]
    (tmp_path / "waiting.jsonl").write_text("".join(json.dumps(x) + "\n" for x in waiting))
    env = env_with(redis_url)
    port = free_port()
    target = f"127.0.0.1:{port}"
    ours = f'app="{app_name}"'
    with (
        prometheus(tmp_path / "prometheus", [target], rules=[ALERTS]) as server,
        WorkerProcess(
            "shop:app", tmp_path, env, "--metrics-port", str(port), "--metrics-host", "127.0.0.1"
        ) as worker,
    ):

        def until(check: Callable[[], Any], what: str) -> Any:
            def polled() -> Any:
                assert worker.proc.poll() is None, worker.output
                return check()

            try:
                return wait_for(polled, HANG, interval=0.5)
            except AssertionError:
                raise AssertionError(f"{what}; worker:\n{worker.output}") from None

        # Every rule loaded and evaluated without an error.
        def rules_ok() -> bool:
            rules = server.rules()
            return len(rules) == 7 and all(r["health"] == "ok" for r in rules)

        until(rules_ok, "the rules never all evaluated")

        # Processed totals: what was sent, once processed.
        done = cli("sendmany", "shop:orders", "good.jsonl", cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        processed = f"sum(runnel_events_processed_total{{{ours}}})"
        until(lambda: value(server, processed) == GOOD, "processed never reached GOOD")

        # A poison event quarantines its partition: the alert fires for that partition.
        done = cli("send", "shop:orders", '{"key": "poisoned", "n": -1}', cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        poison_id = done.stdout.split()[-1]
        [alert] = until(lambda: firing(server, "RunnelPartitionQuarantined"), "no quarantine alert")
        partition = alert["partition"]
        assert alert["app"] == app_name and alert["processor"] == "charge"

        # Events behind it wait: the lag is what was sent, and none of them is processed.
        done = cli("sendmany", "shop:orders", "waiting.jsonl", cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        of = f'{ours},processor="charge",partition="{partition}"'
        lag = f"max(runnel_partition_lag{{{of}}})"
        until(lambda: value(server, lag) == WAITING, "the lag never reached WAITING")
        assert value(server, f"max(runnel_partition_pending{{{of}}})") == 1  # the poison
        assert value(server, processed) == GOOD
        # Its failure fires the failing-processor alert.
        [failing] = until(lambda: firing(server, "RunnelProcessorFailing"), "no failure alert")
        assert failing["processor"] == "charge"

        # Skipping the poison: the partition goes on, the lag drains, the alert ends.
        done = cli(
            *("processor", "skip", "shop:charge", "--partition", partition, "--id", poison_id),
            cwd=tmp_path,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        until(lambda: value(server, processed) == GOOD + WAITING, "processed never caught up")
        until(lambda: value(server, lag) == 0, "the lag never drained")
        until(lambda: not firing(server, "RunnelPartitionQuarantined"), "quarantine alert stays")

        # A job that fails for good: the dead letters alert fires for its queue, and the
        # job's name is in exported_job (Prometheus keeps `job` for the scrape job).
        done = cli("jobs", "send", "shop:doomed", cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        [dead] = until(lambda: firing(server, "RunnelJobDeadLetters"), "no dead letters alert")
        assert (dead["app"], dead["queue"]) == (app_name, "default")
        [(labels, count)] = server.query(f"runnel_jobs_dead_total{{{ours}}}")
        assert (labels["exported_job"], labels["job"], count) == ("doomed", "runnel", 1)

        # Every query of the operations guide parses; its dead jobs are per job name.
        documented = documented_queries()
        assert len(documented) > 10
        for expr in documented:
            assert server.parses(expr) is None, (expr, server.parses(expr))
        [dead_jobs] = [q for q in documented if "increase(runnel_jobs_dead_total" in q]
        per_job = until(lambda: server.query(dead_jobs), "no dead jobs per job name")
        assert [x for x, _ in per_job] == [{"exported_job": "doomed"}]

        # Every query of the dashboard parses (a PromQL error is a 400), and answers.
        queries = dashboard_queries()
        for expr in queries:
            assert server.parses(expr) is None, (expr, server.parses(expr))
        [lags] = [
            q
            for q in queries
            if q.startswith("max by (processor, partition) (runnel_partition_lag")
        ]
        assert {x["partition"] for x, _ in server.query(lags)} == {"0", "1", "2", "3"}

        # The worker gone: its target down, the alert pending (it waits 2 minutes).
        worker.kill()
        wait_for(lambda: firing(server, "RunnelWorkerDown", "pending"), HANG, interval=0.5)
        assert value(server, f'up{{instance="{target}"}}') == 0
