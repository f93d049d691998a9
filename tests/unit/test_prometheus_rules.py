"""The shipped alert rules (docs/prometheus/alerts.yml) and Grafana dashboard
(docs/grafana/runnel.json): promtool checks the rules and runs their unit tests
(docs/prometheus/alerts_test.yml), every alert is tested firing and not firing and
documented, and every metric the rules and the dashboard name is one the workers export.

That every expression parses is checked against a real Prometheus in
tests/processes/test_prometheus_scrape.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from runnel.metrics.definitions import Definitions
from tests.support.prometheus import ALERTS, DASHBOARD, PROMTOOL, ROOT, require

ALERT_TESTS = ALERTS.parent / "alerts_test.yml"
METRIC = re.compile(r"(?<![\w\"])(?:runnel_[a-z_]+|up)\b(?![\w\"(])")
"""A series name in PromQL: not a label value (quoted), not a function (called)."""
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported() -> set[str]:
    """The series names a worker's registry exports (derived from the code, not listed)."""
    names = set()
    for family in Definitions().registry.collect():
        names |= {family.name + suffix for suffix in SUFFIXES[family.type]}
    return names


def alert_names() -> list[str]:
    return re.findall(r"^\s+- alert: (\w+)$", ALERTS.read_text(), re.M)


def alert_exprs() -> list[str]:
    """Each rule's expression: one line, or the indented block after ``expr: |``."""
    exprs: list[str] = []
    lines = ALERTS.read_text().splitlines()
    for n, line in enumerate(lines):
        key, _, value = line.strip().partition(" ")
        if key != "expr:":
            continue
        if value != "|":
            exprs.append(value)
            continue
        indent = len(line) - len(line.lstrip())
        block = []
        for more in lines[n + 1 :]:
            if more.strip() and len(more) - len(more.lstrip()) <= indent:
                break
            block.append(more.strip())
        exprs.append("\n".join(block).strip())
    return exprs


def dashboard_exprs() -> list[str]:
    """Every PromQL expression of the dashboard: its panels' and its variables' queries."""
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            found = re.fullmatch(r"label_values\((.*), \w+\)", var["query"]["query"])
            assert found is not None, var
            exprs.append(found.group(1))
    return exprs


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = require(PROMTOOL, "promtool")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)


def test_promtool_checks_the_rules() -> None:
    done = promtool("check", "rules", str(ALERTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in done.stdout


def test_promtool_runs_the_rules_unit_tests() -> None:
    done = promtool("test", "rules", str(ALERT_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_unit_tests_see_every_alert_fire_and_not_fire() -> None:
    text = ALERT_TESTS.read_text()
    cases = re.findall(r"alertname: (\w+)\n\s+exp_alerts:( \[\])?", text)
    names = alert_names()
    assert len(names) >= 6
    for name in names:
        outcomes = {bool(empty) for alert, empty in cases if alert == name}
        assert outcomes == {True, False}, f"{name}: firing and not firing, each once at least"


def test_a_broken_rule_fails_the_unit_tests(tmp_path: Path) -> None:
    """So that the test above cannot pass with tests that check nothing."""
    rules = ALERTS.read_text().replace("runnel_partition_quarantined) > 0", "x) > 0")
    (tmp_path / "alerts.yml").write_text(rules)
    (tmp_path / "alerts_test.yml").write_text(ALERT_TESTS.read_text())
    done = promtool("test", "rules", str(tmp_path / "alerts_test.yml"))
    assert done.returncode != 0
    assert "RunnelPartitionQuarantined" in done.stdout + done.stderr


def test_the_rules_name_only_exported_metrics() -> None:
    exprs = alert_exprs()
    assert len(exprs) == len(alert_names())
    used = {name for expr in exprs for name in METRIC.findall(expr)}
    assert "runnel_partition_lag" in used
    assert used - exported() == {"up"}  # up: Prometheus's own, for each target


def test_the_dashboard_is_grafana_json_over_exported_metrics() -> None:
    dash: dict[str, Any] = json.loads(DASHBOARD.read_text())
    assert dash["uid"] == "runnel" and dash["title"] == "Runnel"
    exprs = dashboard_exprs()
    used = {name for expr in exprs for name in METRIC.findall(expr)}
    assert used <= exported(), used - exported()
    # Throughput, lag and lost per partition; job rates, failures and run times per job
    # name; executors; and the tables.
    for name in (
        "runnel_events_processed_total",
        "runnel_partition_lag",
        "runnel_partition_lost",
        "runnel_jobs_started_total",
        "runnel_jobs_dead_total",
        "runnel_job_run_seconds_bucket",
        "runnel_partitions_owned",
        "runnel_table_commits_total",
    ):
        assert name in used, name
    # Panels with unique ids, each query with a datasource of the dashboard's variable.
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_the_metric_pattern_finds_names_where_promql_puts_them() -> None:
    expr = 'sum(rate(runnel_a_total{x="runnel_b"}[1m])) / runnel_c - runnel_d and up == 0'
    assert METRIC.findall(expr) == ["runnel_a_total", "runnel_c", "runnel_d", "up"]
    assert METRIC.findall("max by (app) (runnel_e) > 0 unless upper(x)") == ["runnel_e"]


def test_operations_md_documents_every_alert_and_the_files() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    for name in alert_names():
        assert f"`{name}`" in text, name
    for path in (ALERTS, ALERT_TESTS, DASHBOARD):
        assert f"`{path.relative_to(ROOT)}`" in text, path


def test_operations_md_lists_the_dashboard_rows() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    rows = [p["title"] for p in json.loads(DASHBOARD.read_text())["panels"] if p["type"] == "row"]
    assert len(rows) == 5
    for title in rows:
        assert f"\n- {title}: " in text, title


def test_the_promtool_commands_of_operations_md_print_what_it_shows() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    [block] = [b for b in re.findall(r"^```bash\n(.*?)^```$", text, re.M | re.S) if "promtool" in b]
    sessions = [s for s in block.split("\n\n") if s.strip()]
    assert len(sessions) == 2
    for session in sessions:
        command, *shown = session.splitlines()
        assert command.startswith("$ promtool "), command
        args = command.removeprefix("$ promtool ").split()
        done = subprocess.run(
            [require(PROMTOOL, "promtool"), *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert (done.stdout + done.stderr).strip().splitlines() == shown, command


def test_the_metrics_table_of_operations_md_is_the_registry() -> None:
    """Every metric a worker exports has its row, and every row is exported."""
    text = (ROOT / "docs" / "operations.md").read_text()
    rows = dict(re.findall(r"^\| `(runnel_[a-z_]+)` \| (\w+) \|", text, re.M))
    families = {f.name: f.type for f in Definitions().registry.collect()}
    named = {n + ("_total" if t == "counter" else ""): t for n, t in families.items()}
    assert rows == named
