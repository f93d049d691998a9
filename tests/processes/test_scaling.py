"""Workers join and leave while events flow: nothing lost, order kept, no overlap."""

from __future__ import annotations

import threading

import redis

from tests.support.processes import wait_for
from tests.support.worker_cluster import Cluster

BATCH = 1500


def test_scale_out_then_in_while_events_flow(cluster: Cluster) -> None:
    first = cluster.start()
    cluster.wait_settled([first])
    cluster.send(BATCH)

    # Scale out: each join happens with a backlog in flight, then another batch follows.
    second = cluster.start()
    cluster.send(BATCH)
    cluster.wait_settled([first, second])
    cluster.send(BATCH)
    third = cluster.start()
    cluster.send(BATCH)
    cluster.wait_settled([first, second, third])
    cluster.send(BATCH)
    live = [first, second, third]
    wait_for(lambda: {s.pid for s in cluster.seen()} >= {w.proc.pid for w in live}, 60)

    # Scale in: SIGTERM one at a time, each with events still flowing.
    cluster.send(BATCH)
    assert third.stop() == 0, third.output
    cluster.send(BATCH)
    cluster.wait_settled([first, second])
    cluster.send(BATCH)
    assert second.stop() == 0, second.output
    cluster.send(BATCH)

    cluster.wait_all_seen()
    cluster.check_settled([first])
    cluster.check_at_least_once_in_order()
    assert cluster.overlaps() == []
    by_pid = {s.pid for s in cluster.seen()}
    assert by_pid == {w.proc.pid for w in live}, "every worker processed something"
    assert first.proc.poll() is None
    wait_for(lambda: cluster.total_pending() == 0, 30)
    assert first.stop() == 0, first.output


def test_workers_joining_at_once_both_stay_members(cluster: Cluster) -> None:
    """Two workers read the membership (to drop dead members) while a third party holds
    the admin lock, then join one after the other: the second must not drop the first,
    which it never saw."""
    cluster.send(BATCH)
    # The test holds the admin lock, as an executor changing the membership would: both
    # workers start, beat, and wait for it.
    admin = f"__lock:{cluster.app_name}.pings.work.admin"
    cluster.client.set(admin, "test", px=30_000)
    with AdminLockWaiters(cluster, admin) as waiters:
        first, second = cluster.start(), cluster.start()
        wait_for(lambda: len(waiters.clients) >= 2, 30)
    cluster.client.delete(admin)

    cluster.wait_settled([first, second])
    cluster.send(BATCH)
    cluster.wait_all_seen()
    cluster.check_settled([first, second])
    cluster.check_fenced(cluster.check_at_least_once_in_order())
    assert cluster.overlaps() == []
    # Both joined once and stayed members.
    for w in (first, second):
        assert "is no longer a member" not in w.output, w.output
        assert w.output.count("joined") == 1, w.output
        assert w.stop() == 0, w.output


class AdminLockWaiters:
    """Which connections tried to take the admin lock, as Redis's MONITOR reports them
    (only a worker that has read the membership asks for the lock)."""

    def __init__(self, cluster: Cluster, admin: str) -> None:
        self.admin = admin
        self.clients: set[str] = set()
        self._client = redis.Redis.from_url(cluster.redis_url)
        self._monitor = self._client.monitor()
        self._monitor.__enter__()  # MONITOR is on from here: nothing is missed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> AdminLockWaiters:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._client.set("monitor-wake", 1)  # anything, so the watcher reads once more
        self._thread.join(30)
        self._monitor.__exit__()
        self._client.close()

    def _watch(self) -> None:
        while not self._stop.is_set():
            seen = self._monitor.next_command()
            words = seen["command"].split()
            # The take script names the lock as its one key (the test's own SET does not
            # count, nor what a script calls inside Redis).
            if words[:1] in (["EVALSHA"], ["EVAL"]) and self.admin in words[3:4]:
                self.clients.add(f"{seen['client_address']}:{seen['client_port']}")
