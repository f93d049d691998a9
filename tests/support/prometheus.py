"""A real Prometheus server (Debian's ``prometheus``) scraping workers' ``/metrics``, and
its query API; skipped where the binary is missing.

It listens on 127.0.0.1 only, scrapes every second, and keeps its data in a temporary
directory removed with it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.metrics_scrape import free_port
from tests.support.processes import wait_for

PROMETHEUS = shutil.which("prometheus")

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
scrape_configs:
  - job_name: runnel
    static_configs:
      - targets: {targets}
"""


@contextmanager
def prometheus(directory: Path, targets: Sequence[str]) -> Iterator[Prometheus]:
    """Prometheus scraping ``targets`` (``host:port``), ready to be queried."""
    if PROMETHEUS is None:
        pytest.skip("prometheus not found (apt-get install prometheus)")
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "prometheus.yml"
    config.write_text(CONFIG.format(targets=json.dumps(list(targets))))
    port = free_port()
    log = directory / "prometheus.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
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
