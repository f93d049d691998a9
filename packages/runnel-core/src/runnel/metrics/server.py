"""Serving ``/metrics``: from one worker's registry, or, under ``runnel worker --processes
N``, from the supervisor for all its children (prometheus_client's multiprocess mode)."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from runnel.exceptions import Misconfigured
from runnel.metrics.switch import MULTIPROC_DIR, SUPERVISED


@dataclass
class Server:
    httpd: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def serve(registry: CollectorRegistry, port: int, host: str) -> Server:
    """Serve ``registry`` on http://host:port/metrics from a daemon thread."""
    try:
        httpd, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise Misconfigured(f"cannot serve metrics on {host}:{port}: {reason}") from None
    except OverflowError:
        raise Misconfigured(f"cannot serve metrics on port {port}: not a valid port") from None
    return Server(httpd, thread)


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
def supervisor_metrics(port: int, host: str) -> Iterator[Supervised]:
    """One endpoint for all the children, reading the fresh directory they write to;
    the directory is removed on the way out."""
    directory = tempfile.mkdtemp(prefix="runnel-metrics-")
    try:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=directory)
        server = serve(registry, port, host)
        try:
            yield Supervised(directory, server)
        finally:
            server.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
