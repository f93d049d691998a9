"""``/healthz`` and ``/readyz`` of an in-process worker, on each store: ready once it
reaches the store, joined its processor's group and registered its job executor; not
ready (and still live) while it stops. Served on ``health_port``, and beside ``/metrics``.
The processes' side (a Redis that goes away, ``--processes``) is in
tests/processes/test_health_probes.py."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from runnel import Record
from tests.support.apps import HANG_GUARD, Running, make_app
from tests.support.ports import free_port


class Ping(Record):
    key: str


def probe(port: int, path: str, method: str = "GET") -> tuple[int, bytes] | None:
    """Status and body of a request to http://127.0.0.1:port/path; None if none answers."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return None


async def answered(port: int, path: str, status: int) -> dict[str, Any]:
    """The JSON body, once ``path`` answers ``status`` (probed off the event loop)."""
    async with asyncio.timeout(HANG_GUARD):
        while True:
            found = await asyncio.to_thread(probe, port, path)
            if found is not None and found[0] == status:
                body: dict[str, Any] = json.loads(found[1])
                return body
            await asyncio.sleep(0.05)


async def test_probes_of_a_worker(store_url: str, app_name: str) -> None:
    await check_probes("memory://" if store_url == "memory" else store_url, app_name)


async def check_probes(url: str, app_name: str) -> None:
    health, metrics = free_port(), free_port()
    app = make_app(
        app_name,
        url,
        health_port=health,
        health_host="127.0.0.1",
        metrics_port=metrics,
        metrics_host="127.0.0.1",
    )
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)
    started, release = asyncio.Event(), asyncio.Event()

    @app.processor(pings)
    async def hold(events):  # type: ignore[no-untyped-def]
        async for _ in events.records():
            started.set()
            await release.wait()

    @app.job
    async def double(n: int) -> int:
        return 2 * n

    async with Running(app) as running:
        ok = {"status": "ready", "reasons": []}
        assert await answered(health, "/readyz", 200) == ok
        assert await answered(metrics, "/readyz", 200) == ok  # beside the metrics too
        assert await answered(health, "/healthz", 200) == {"status": "live", "reasons": []}
        assert await answered(metrics, "/healthz", 200) == {"status": "live", "reasons": []}
        assert running.worker.health.ready().ok
        names = [c.name for c in running.worker.health.checks]
        assert names == ["store", "processor hold", "jobs"]
        head = await asyncio.to_thread(probe, health, "/readyz", "HEAD")
        assert head == (200, b"")
        assert await asyncio.to_thread(probe, health, "/metrics") == (
            404,
            b'{"error": "not found"}\n',
        )
        metrics_text = await asyncio.to_thread(probe, metrics, "/metrics")
        assert metrics_text is not None and b"runnel_leader" in metrics_text[1]

        # Stopping: an iteration in flight holds the stop; meanwhile not ready, still live.
        await pings.send(Ping(key="a"))
        async with asyncio.timeout(HANG_GUARD):
            await started.wait()
        running.worker.stop()
        stopping = {"status": "not ready", "reasons": ["stopping"]}
        assert await answered(health, "/readyz", 503) == stopping
        assert await answered(health, "/healthz", 200) == {"status": "live", "reasons": []}
        release.set()
        assert await running.exit_code() == 0
    assert await asyncio.to_thread(probe, health, "/healthz") is None
    assert await asyncio.to_thread(probe, metrics, "/healthz") is None


async def test_a_blocked_event_loop_is_not_live(app_name: str) -> None:
    """A processor that blocks the event loop (a blocking call in ``async def``): once
    ``liveness_timeout`` has passed, /healthz fails; it passes again when the loop runs."""
    port = free_port()
    app = make_app(
        app_name, "memory://", health_port=port, health_host="127.0.0.1", liveness_timeout=0.5
    )
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=1)
    wedged: list[dict[str, Any]] = []
    seen = threading.Event()

    def watch() -> None:
        """Probe from a thread of its own: the event loop is what is blocked."""
        while not seen.is_set():
            found = probe(port, "/healthz")
            if found is not None and found[0] == 503:
                wedged.append(json.loads(found[1]))
                seen.set()
            time.sleep(0.05)

    @app.processor(pings)
    async def block(events):  # type: ignore[no-untyped-def]
        async for _ in events.records():
            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            seen.wait(HANG_GUARD)  # blocking: the loop runs nothing meanwhile
            watcher.join(HANG_GUARD)

    async with Running(app) as running:
        assert await answered(port, "/healthz", 200) == {"status": "live", "reasons": []}
        await pings.send(Ping(key="a"))
        assert await asyncio.to_thread(seen.wait, HANG_GUARD)
        assert wedged[0]["status"] == "not live"
        [reason] = wedged[0]["reasons"]
        assert reason.startswith("the event loop has not run for "), reason
        assert await answered(port, "/healthz", 200) == {"status": "live", "reasons": []}
        assert await running.stop() == 0
