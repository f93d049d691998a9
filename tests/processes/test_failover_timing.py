"""How long failover takes with the settings of these tests: measured and printed only.

Nothing here asserts on time. With events flowing continuously (one per key every
20 ms, sent from this process through the app's own stream), it prints:

* kill -9: from the kill until every partition the killed worker held has a new owner
  that has processed an event sent after the kill;
* SIGTERM: from the signal until every partition the stopping worker held has been
  processed elsewhere (an event sent after the signal).

Run with ``-s`` to see the figures.
"""

from __future__ import annotations

import asyncio
import importlib.util
import signal
import threading
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.processes import WorkerProcess, wait_for
from tests.support.worker_cluster import MODULE, Cluster, Frozen, check_overlaps

pytestmark = pytest.mark.measurement


class Sender(threading.Thread):
    """Sends one event per key every ``pause`` seconds, numbering on from ``start``."""

    def __init__(self, module: ModuleType, start: int, keys: int = 24, pause: float = 0.02):
        super().__init__(daemon=True)
        self.module = module
        self.next_n = start
        self.keys = keys
        self.pause = pause
        self.events: list[dict[str, object]] = []
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._send())
        except BaseException as exc:  # reported by the test
            self.error = exc

    async def _send(self) -> None:
        stream, record = self.module.pings, self.module.Ping
        try:
            while not self.halt.is_set():
                batch = [
                    {"key": f"k{(self.next_n + i) % self.keys}", "n": self.next_n + i}
                    for i in range(self.keys)
                ]
                await stream.send(*[record(**e) for e in batch])
                self.events.extend(batch)
                self.next_n += len(batch)
                await asyncio.sleep(self.pause)
        finally:
            await self.module.app.aclose()


def load_app(cluster: Cluster) -> ModuleType:
    path = Path(cluster.dir) / f"{MODULE}.py"
    spec = importlib.util.spec_from_file_location(f"{MODULE}_{cluster.app_name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def handed_over(cluster: Cluster, gone: WorkerProcess, partitions: list[int], since: int, n: int):
    """Per partition, when another worker first processed an event numbered >= ``n``
    (sent after ``since``); None until every partition has one."""
    first: dict[int, int] = {}
    for s in cluster.seen():
        if s.partition in partitions and s.pid != gone.proc.pid and s.n >= n and s.entered > since:
            first.setdefault(s.partition, s.entered)
    return first if set(first) == set(partitions) else None


ROUNDS = 3


def test_measure_failover_after_kill_9_and_sigterm(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNNEL_REDIS_URL", cluster.redis_url)
    live = [cluster.start() for _ in range(3)]
    cluster.wait_settled(live)
    sender = Sender(load_app(cluster), start=len(cluster.sent))
    sender.start()
    killed: list[Frozen] = []
    kill_times: list[dict[int, float]] = []
    term_times: list[dict[int, float]] = []
    try:
        wait_for(lambda: len(cluster.seen()) >= 500, 30)
        for _ in range(ROUNDS):
            # kill -9 one of three, then bring the group back to three.
            victim = live.pop(0)
            held = cluster.partitions_of(victim)
            killed_at = cluster.now()
            victim.kill()
            after = sender.next_n
            dead_at = cluster.now()
            firsts = wait_for(lambda: handed_over(cluster, victim, held, killed_at, after), 60)  # noqa: B023
            kill_times.append({p: (t - killed_at) / 1e6 for p, t in sorted(firsts.items())})
            killed.append((victim.proc.pid, dead_at, held))
            live.append(cluster.start())
            cluster.wait_settled(live)

            # SIGTERM one of three, then bring the group back to three.
            leaving = live.pop(0)
            held = cluster.partitions_of(leaving)
            termed_at = cluster.now()
            leaving.signal(signal.SIGTERM)
            after = sender.next_n
            firsts = wait_for(lambda: handed_over(cluster, leaving, held, termed_at, after), 60)  # noqa: B023
            term_times.append({p: (t - termed_at) / 1e6 for p, t in sorted(firsts.items())})
            assert leaving.proc.wait(60) == 0, leaving.output
            live.append(cluster.start())
            cluster.wait_settled(live)
    finally:
        sender.halt.set()
        sender.join(30)
    assert sender.error is None, sender.error

    cluster.sent.extend(sender.events)
    cluster.wait_all_seen()
    cluster.check_settled(live)
    seen = cluster.check_at_least_once_in_order()
    cluster.check_fenced(seen)
    check_overlaps(cluster.overlaps(), *killed)
    for w in live:
        assert w.stop() == 0, w.output

    print(
        "\nfailover with lock_expiry=2 s, assignment_sleep=0.25 s, read_timeout=200 ms, "
        "join_delay=0.2 s, grace_period=2 s (3 workers, 8 partitions):"
    )
    for what, rounds in (("kill -9", kill_times), ("SIGTERM", term_times)):
        for i, times in enumerate(rounds, 1):
            detail = ", ".join(f"p{p} {t:.3f}" for p, t in times.items())
            print(
                f"  {what} #{i}: all its partitions processed elsewhere after "
                f"{max(times.values()):.3f} s ({detail})"
            )
