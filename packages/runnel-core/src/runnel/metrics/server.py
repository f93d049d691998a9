"""Serving ``/metrics``: from one worker's registry, or, under ``runnel worker --processes
N``, from the supervisor for all its children (prometheus_client's multiprocess mode).
The same endpoint answers the health probes (:mod:`runnel.runtime.probes`)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from runnel.metrics.switch import MULTIPROC_DIR, SUPERVISED
from runnel.runtime.probes import Probed, Server, probes_app
from runnel.runtime.probes import serve as serve_app

__all__ = ["Server", "Supervised", "serve", "supervisor_metrics"]


def serve(registry: CollectorRegistry, port: int, host: str, probed: Probed) -> Server:
    """Serve ``registry`` on http://host:port/metrics, and the probes of ``probed`` on
    /healthz and /readyz, from a daemon thread."""
    return serve_app(probes_app(probed, make_wsgi_app(registry)), port, host, "metrics")


@dataclass
class Supervised:
    """What a supervisor needs: the children's environment and what to do when one exits."""

    directory: str
    server: Server

    @property
    def env(self) -> dict[str, str]:
        return {MULTIPROC_DIR: self.directory, SUPERVISED: "1"}

    def child_exited(self, pid: int) -> None:
        """Forget a dead child's live gauges (its counters still count)."""
        mark_process_dead(pid, self.directory)


@contextmanager
def supervisor_metrics(port: int, host: str, probed: Probed) -> Iterator[Supervised]:
    """One endpoint for all the children, reading the fresh directory they write to;
    the directory is removed on the way out."""
    directory = tempfile.mkdtemp(prefix="runnel-metrics-")
    try:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=directory)
        server = serve(registry, port, host, probed)
        try:
            yield Supervised(directory, server)
        finally:
            server.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
