"""A real Prometheus server (Debian's ``prometheus``) scraping workers' ``/metrics``, and
its query API; skipped where the binary is missing, except in CI (``CI`` set, as .ci/run
does), where a missing binary fails the test.

It listens on 127.0.0.1 only, scrapes every second, evaluates rules every second, and
keeps its data in a temporary directory removed with it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.ports import free_port
from tests.support.processes import wait_for

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
ROOT = Path(__file__).parents[2]
ALERTS = ROOT / "docs" / "prometheus" / "alerts.yml"
DASHBOARD = ROOT / "docs" / "grafana" / "runnel.json"


def require(path: str | None, name: str) -> str:
    """``path``, or skip (fail in CI: .ci/run installs Debian's ``prometheus``)."""
    if path is None:
        reason = f"{name} not found (apt-get install prometheus)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run this test")
        pytest.skip(reason)
    return path


Series = list[tuple[dict[str, str], float]]


class Prometheus:
    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log

    def _get(self, path: str, **params: str) -> object:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=30) as reply:
            answer = json.loads(reply.read())
        assert answer["status"] == "success", answer
        return answer["data"]

    def parses(self, expr: str) -> str | None:
        """None when Prometheus accepts ``expr``; else its error (a 400 answer)."""
        query = urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=30):
                return None
        except urllib.error.HTTPError as exc:
            return f"{exc.code}: {exc.read().decode()}"

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts pending or firing: labels, annotations, state, value."""
        data = self._get("/api/v1/alerts")
        assert isinstance(data, dict)
        return list(data["alerts"])

    def rules(self) -> list[dict[str, Any]]:
        """The rules loaded, each with its health (``ok`` once evaluated without error)."""
        data = self._get("/api/v1/rules")
        assert isinstance(data, dict)
        return [rule for group in data["groups"] for rule in group["rules"]]

    def query(self, expr: str) -> Series:
        """An instant query: each series' labels (``__name__`` included) and value."""
        data = self._get("/api/v1/query", query=expr)
        assert isinstance(data, dict) and data["resultType"] == "vector", data
        return [(s["metric"], float(s["value"][1])) for s in data["result"]]

    def targets_up(self) -> set[str]:
        """The scraped targets whose last scrape succeeded (``host:port``)."""
        data = self._get("/api/v1/targets")
        assert isinstance(data, dict)
        return {t["labels"]["instance"] for t in data["activeTargets"] if t["health"] == "up"}


CONFIG = """
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: {rules}
scrape_configs:
  - job_name: runnel
    static_configs:
      - targets: {targets}
"""


@contextmanager
def prometheus(
    directory: Path, targets: Sequence[str], rules: Sequence[Path] = ()
) -> Iterator[Prometheus]:
    """Prometheus scraping ``targets`` (``host:port``) and evaluating the rule files
    ``rules``, ready to be queried."""
    binary = require(PROMETHEUS, "prometheus")
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "prometheus.yml"
    files = json.dumps([str(r) for r in rules])
    config.write_text(CONFIG.format(targets=json.dumps(list(targets)), rules=files))
    port = free_port()
    log = directory / "prometheus.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Prometheus(f"http://127.0.0.1:{port}", log)
    try:
        wait_for(lambda: _ready(server, proc), 60, interval=0.2)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def _ready(server: Prometheus, proc: subprocess.Popen[bytes]) -> bool:
    if proc.poll() is not None:
        raise AssertionError(f"prometheus exited:\n{server.log.read_text()}")
    try:
        with urllib.request.urlopen(f"{server.url}/-/ready", timeout=5) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False
