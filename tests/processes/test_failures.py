"""Workers killed, frozen and cut off from Redis while events flow.

Each test ends with the same checks: every event sent was processed at least once, each
key's events in the order sent (duplicates aside), no two processes inside one partition
at once (beyond what a frozen or killed iteration explains), every iteration began under
its worker's own lock, and the group settled: every partition owned exactly once by a
live worker that holds its lock.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest

from tests.support.processes import wait_for
from tests.support.proxy import Proxy
from tests.support.worker_cluster import (
    LOCK_EXPIRY,
    TEST_CLIENT,
    Cluster,
    check_overlaps,
    first_occurrences,
    is_stopped,
    pause,
)

BATCH = 1500


def worked_on(cluster: Cluster, pid: int, since: int) -> set[int]:
    """The partitions ``pid`` entered after ``since`` (Redis TIME, microseconds)."""
    return {s.partition for s in cluster.seen() if s.pid == pid and s.entered > since}


def processed_by(cluster: Cluster, pid: int, numbers: set[int]) -> int:
    return sum(1 for s in cluster.seen() if s.pid == pid and s.n in numbers)


def test_kill_9_one_of_three_workers(cluster: Cluster) -> None:
    workers = [cluster.start() for _ in range(3)]
    cluster.wait_settled(workers)
    cluster.send(BATCH)
    victim = workers[1]
    survivors = [workers[0], workers[2]]
    batch = {int(e["n"]) for e in cluster.send(3 * BATCH)}  # type: ignore[call-overload]
    wait_for(lambda: processed_by(cluster, victim.proc.pid, batch) >= 50, 60, interval=0.01)
    partitions = cluster.partitions_of(victim)

    victim.kill()  # SIGKILL: no clean-up, nothing acknowledged on the way out
    killed_at = cluster.now()
    assert victim.proc.returncode == -signal.SIGKILL
    # What it read and did not acknowledge stays pending; nobody else may touch its
    # partitions before its locks expire, so this is exactly what it left behind.
    left_behind = cluster.pending_ids(partitions)
    assert not batch <= cluster.seen_numbers(), "the batch was done before the kill"
    assert any(left_behind.values()), "the killed worker left nothing unacknowledged"

    cluster.send(BATCH)  # sent after the kill
    cluster.wait_all_seen()
    cluster.check_settled(survivors)
    assert sorted(p for w in survivors for p in cluster.partitions_of(w)) == list(range(8))
    seen = cluster.check_at_least_once_in_order()
    cluster.check_fenced(seen)
    check_overlaps(cluster.overlaps(), (victim.proc.pid, killed_at, partitions))

    # Its unacknowledged events were delivered again to the new owners, first and in order.
    assert all(s.pid != victim.proc.pid for s in seen if s.entered > killed_at)
    for p, numbers in left_behind.items():
        after = [s.n for s in seen if s.partition == p and s.entered > killed_at]
        assert first_occurrences(after)[: len(numbers)] == numbers, p
    wait_for(lambda: cluster.total_pending() == 0, 30)
    for w in survivors:
        assert w.stop() == 0, w.output


def test_sigstop_longer_than_two_lock_expiries_then_sigcont(cluster: Cluster) -> None:
    steady, frozen = cluster.start(), cluster.start()
    cluster.wait_settled([steady, frozen])
    batch = {int(e["n"]) for e in cluster.send(3 * BATCH)}  # type: ignore[call-overload]
    wait_for(lambda: processed_by(cluster, frozen.proc.pid, batch) >= 50, 60, interval=0.01)
    partitions = cluster.partitions_of(frozen)

    pause(frozen)  # SIGSTOP, and wait until the kernel reports it stopped
    stopped_at = cluster.now()
    assert not batch <= cluster.seen_numbers(), "the batch was done before the pause"
    cluster.send(BATCH)  # events keep coming while it is frozen

    # The other worker takes everything over while it is frozen, and works on it.
    wait_for(lambda: cluster.settled([steady]), 30)
    wait_for(lambda: set(partitions) <= worked_on(cluster, steady.proc.pid, stopped_at), 30)
    assert is_stopped(frozen.proc.pid)
    # ...and the frozen one stays frozen for more than two lock lifetimes in all.
    while cluster.now() - stopped_at < (2 * LOCK_EXPIRY + 1) * 1_000_000:
        time.sleep(0.1)

    resumed_at = cluster.now()
    frozen.signal(signal.SIGCONT)
    cluster.send(BATCH)
    cluster.wait_settled([steady, frozen])
    # It rejoined and works again on what it was given back.
    late = {int(e["n"]) for e in cluster.send(BATCH)}  # type: ignore[call-overload]
    cluster.wait_all_seen()
    assert processed_by(cluster, frozen.proc.pid, late) > 0
    cluster.check_settled([steady, frozen])

    seen = cluster.check_at_least_once_in_order()

    # Every iteration began under its worker's lock, but for the one per partition that
    # the frozen worker had been handed before the SIGSTOP and entered after the SIGCONT:
    # it began nothing new on partitions it had lost.
    excused = cluster.check_fenced(seen, (frozen.proc.pid, stopped_at, partitions))
    assert all(s.entered > resumed_at for s in excused), excused
    check_overlaps(cluster.overlaps(), (frozen.proc.pid, stopped_at, partitions))
    # It noticed it lost its locks (or its membership), and joined again.
    log = frozen.output
    assert "lost the lock of partition" in log or "is no longer a member; rejoining" in log, log
    assert log.count("joined") >= 2, log
    assert frozen.proc.poll() is None and steady.proc.poll() is None
    wait_for(lambda: cluster.total_pending() == 0, 30)
    for w in (steady, frozen):
        assert w.stop() == 0, w.output


def kill_connections(cluster: Cluster) -> int:
    """CLIENT KILL every connection but the test's own; how many were killed."""
    killed = 0
    for client in cluster.client.client_list():
        if client.get("name") != TEST_CLIENT:
            killed += cluster.client.client_kill_filter(_id=client["id"])
    return killed


def test_redis_connections_dropped_repeatedly(cluster: Cluster) -> None:
    workers = [cluster.start(), cluster.start()]
    cluster.wait_settled(workers)
    for _ in range(3):
        batch = {int(e["n"]) for e in cluster.send(2 * BATCH)}  # type: ignore[call-overload]
        wait_for(lambda batch=batch: len(batch & cluster.seen_numbers()) >= 100, 60, interval=0.01)
        assert kill_connections(cluster) >= 2 * 3  # each worker has several
        time.sleep(0.3)
        assert all(w.proc.poll() is None for w in workers), cluster.logs()

    cluster.send(BATCH)
    cluster.wait_all_seen()
    cluster.check_settled(workers)
    seen = cluster.check_at_least_once_in_order()
    cluster.check_fenced(seen)
    check_overlaps(cluster.overlaps())
    wait_for(lambda: cluster.total_pending() == 0, 30)  # failed acks are sent again
    for w in workers:
        assert w.stop() == 0, w.output


@pytest.fixture
def proxy(redis_url: str) -> Iterator[Proxy]:
    url = urlparse(redis_url)
    p = Proxy(url.hostname or "127.0.0.1", url.port or 6379)
    yield p
    p.close()


def test_connection_dropped_with_a_read_reply_in_flight(cluster: Cluster, proxy: Proxy) -> None:
    """What CLIENT KILL does at an unlucky moment, made certain: Redis ran the fenced
    XREADGROUP (its entries are now pending in the group) and the reply is lost. Those
    entries must still be processed, before the later events of their keys."""
    cluster.extra_env["RUNNEL_REDIS_URL"] = proxy.url  # the workers talk through the proxy
    # Settled before any event exists, so that every read below is of new entries (a
    # lost reply to a re-read of pending entries would simply be read again).
    workers = [cluster.start()]
    cluster.wait_settled(workers)
    workers.append(cluster.start())
    cluster.wait_settled(workers)
    cluster.send(3 * BATCH)
    wait_for(lambda: len(cluster.seen()) >= 100, 60, interval=0.01)
    proxy.arm(b"XREADGROUP", reply_contains=b"data")  # only a reply carrying entries
    wait_for(proxy.dropped.is_set, 30, interval=0.01)
    assert all(w.proc.poll() is None for w in workers)

    # Events sent after the drop come after the lost ones in every partition: once they
    # are all done, so must be the lost ones.
    later = {int(e["n"]) for e in cluster.send(BATCH)}  # type: ignore[call-overload]
    wait_for(lambda: later <= cluster.seen_numbers(), 60)
    seen = cluster.check_at_least_once_in_order()
    cluster.wait_all_seen(timeout=5)  # already true when the check above passed
    cluster.check_settled(workers)
    cluster.check_fenced(seen)
    check_overlaps(cluster.overlaps())
    for w in workers:
        assert w.stop() == 0, w.output


def test_connection_dropped_with_the_admin_lock_reply_in_flight(
    cluster: Cluster, proxy: Proxy
) -> None:
    """The reply to the SET NX taking the admin lock is lost, so the joiner does not know
    it holds the lock. Joining must still go through (not wait for the lock to expire),
    and the joiner must be beating whenever it is a member, however long joining takes."""
    cluster.extra_env["RUNNEL_REDIS_URL"] = proxy.url
    first = cluster.start()
    cluster.wait_settled([first])
    known = set(cluster.members())
    cluster.send(BATCH)
    proxy.arm(b".admin", reply_contains=b"+OK")  # the joiner's SET NX taking the admin lock
    second = cluster.start()
    wait_for(proxy.dropped.is_set, 30, interval=0.01)
    # The joiner has beaten once already: its heartbeat key names its executor id.
    beats = f"__beat:{cluster.app_name}.pings.work."
    [joiner] = [
        k.decode()[len(beats) :]
        for k in cluster.client.scan_iter(match=beats + "*")
        if k.decode()[len(beats) :] not in known
    ]

    def member_without_heartbeat() -> bool:
        with cluster.client.pipeline(transaction=True) as pipe:
            pipe.get(f"__memb:{cluster.app_name}.pings.work")
            pipe.exists(beats + joiner)
            raw, beating = pipe.execute()
        return joiner in json.loads(raw or "{}") and not beating

    def settled_checking() -> bool:
        assert not member_without_heartbeat(), "a member with an expired heartbeat"
        return cluster.settled([first, second])

    wait_for(settled_checking, 40, interval=0.01)
    cluster.send(BATCH)
    cluster.wait_all_seen()
    seen = cluster.check_at_least_once_in_order()
    cluster.check_settled([first, second])
    cluster.check_fenced(seen)
    check_overlaps(cluster.overlaps())
    assert "stopped beating" not in first.output, first.output
    assert "is no longer a member" not in second.output, second.output
    for w in (first, second):
        assert w.stop() == 0, w.output


def test_acknowledgement_lost_before_going_idle_is_sent_again(
    cluster: Cluster, proxy: Proxy
) -> None:
    """The acknowledgement sent as a partition goes idle never reaches Redis. It must be
    sent again while the partition stays idle, not left pending."""
    cluster.extra_env["RUNNEL_REDIS_URL"] = proxy.url
    worker = cluster.start()
    cluster.wait_settled([worker])
    cluster.send(200)
    cluster.wait_all_seen()
    wait_for(lambda: cluster.total_pending() == 0, 30)

    proxy.arm(b"XACK", drop_request=True)  # the next XACK never reaches Redis
    cluster.send(1)  # processed, then acknowledged as its partition goes idle
    wait_for(proxy.dropped.is_set, 30, interval=0.01)
    cluster.wait_all_seen()
    assert "acknowledging 1 event failed" in worker.output, worker.output
    # Kept and sent again: nothing stays pending.
    wait_for(lambda: cluster.total_pending() == 0, 10)
    cluster.check_settled([worker])
    cluster.check_fenced(cluster.check_at_least_once_in_order())
    check_overlaps(cluster.overlaps())
    assert worker.stop() == 0, worker.output
