"""Leader election while workers come, go, die and freeze.

The app gets an ``on_leader`` timer that RPUSHes ``"{pid}:{redis TIME}"`` to
``leader_log`` every 0.2 s (and then bumps a counter: a job making two redis calls), so
the log shows who led when. Run-length encoded, the pids in it form one run per
leadership term: the writer changes only when the previous leader was killed or stopped.
A frozen leader is the documented exception (docs/rebalance.md, "Leader election"):
after SIGCONT it may run its jobs until its next claim fails, and not after.
"""

from __future__ import annotations

import signal
from itertools import groupby

from tests.support.processes import WorkerProcess, wait_for
from tests.support.worker_cluster import Cluster, Frozen, check_overlaps, pause

BATCH = 1000
CYCLES = 4
IN_FLIGHT = 100_000
"""Microseconds a leader job's command sent before its worker noticed the demotion may
take to reach Redis on a loaded machine (the timer runs every 200,000)."""


def leader_log(cluster: Cluster) -> list[tuple[int, int]]:
    """``(pid, redis time in microseconds)`` for every run of the leader's timer."""
    out = []
    for raw in cluster.client.lrange("leader_log", 0, -1):
        pid, at = raw.decode().split(":")
        out.append((int(pid), int(at)))
    return out


def terms(log: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """The log run-length encoded: ``(pid, first time, last time)`` per run."""
    out = []
    for pid, group in groupby(log, key=lambda entry: entry[0]):
        times = [at for _, at in group]
        out.append((pid, times[0], times[-1]))
    return out


def writer_after(cluster: Cluster, since: int) -> int | None:
    """The pid of the first timer run after ``since``, if any."""
    return next((pid for pid, at in leader_log(cluster) if at > since), None)


def by_pid(workers: list[WorkerProcess], pid: int) -> WorkerProcess:
    [worker] = [w for w in workers if w.proc.pid == pid]
    return worker


def status_leader_pid(cluster: Cluster) -> int | None:
    leader = cluster.status()["leader"]
    return int(leader.split(":")[1]) if leader else None


def start_leading(cluster: Cluster, count: int) -> list[WorkerProcess]:
    cluster.extra_env["TEST_LEADER_TIMER"] = "1"
    workers = [cluster.start() for _ in range(count)]
    cluster.wait_settled(workers)
    wait_for(lambda: len(leader_log(cluster)) >= 3, 30)
    return workers


def finish(cluster: Cluster, live: list[WorkerProcess], *frozen: Frozen) -> None:
    cluster.send(BATCH)
    cluster.wait_all_seen()
    cluster.check_settled(live)
    cluster.check_fenced(cluster.check_at_least_once_in_order(), *frozen)
    check_overlaps(cluster.overlaps(), *frozen)


def test_leader_election_under_churn(cluster: Cluster) -> None:
    workers = start_leading(cluster, 3)
    cluster.send(BATCH)
    first = by_pid(workers, leader_log(cluster)[-1][0])
    assert status_leader_pid(cluster) == first.proc.pid

    # Churn that must not move the leadership: a worker joins, a follower leaves.
    joiner = cluster.start()
    workers.append(joiner)
    cluster.send(BATCH)
    follower = next(w for w in workers if w is not first and w is not joiner)
    assert follower.stop() == 0, follower.output
    live = [w for w in workers if w is not follower]
    cluster.wait_settled(live)
    mark = cluster.now()
    wait_for(lambda: sum(1 for _, at in leader_log(cluster) if at > mark) >= 5, 30)
    assert {pid for pid, at in leader_log(cluster) if at > mark} == {first.proc.pid}

    # kill -9 the leader: someone else takes over, and status says so.
    first.kill()
    killed_at = cluster.now()
    live.remove(first)
    cluster.send(BATCH)
    second_pid = wait_for(lambda: writer_after(cluster, killed_at), 30)
    assert second_pid != first.proc.pid
    second = by_pid(live, second_pid)
    wait_for(lambda: status_leader_pid(cluster) == second_pid, 30)

    # SIGTERM the new leader: it resigns on its way out and a third one takes over.
    termed_at = cluster.now()
    assert second.stop() == 0, second.output
    live.remove(second)
    third_pid = wait_for(lambda: writer_after(cluster, last_run_by(cluster, second_pid)), 30)
    assert third_pid not in (first.proc.pid, second_pid)
    wait_for(lambda: status_leader_pid(cluster) == third_pid, 30)

    finish(cluster, live)
    runs = terms(leader_log(cluster))
    assert [pid for pid, _, _ in runs] == [first.proc.pid, second_pid, third_pid], runs
    assert runs[1][1] > killed_at
    assert runs[2][1] > termed_at
    for w in live:
        assert w.stop() == 0, w.output
    assert cluster.status()["leader"] is None


def last_run_by(cluster: Cluster, pid: int) -> int:
    """When ``pid`` last ran the leader's timer."""
    return max(at for p, at in leader_log(cluster) if p == pid)


def demoted(worker: WorkerProcess) -> int:
    """How many times ``worker`` logged that it lost the leadership."""
    return worker.output.count("is no longer the leader")


def test_frozen_leader_stops_leading_once_its_claim_fails(cluster: Cluster) -> None:
    """Freeze the leader until another worker leads, resume it; and again, the other way
    round. As documented (rebalance.md, "Leader election"), the resumed worker may run
    its leader jobs until its next claim fails, but not once it has noticed."""
    workers = start_leading(cluster, 2)
    leaders = [leader_log(cluster)[-1][0]]
    freezes: list[Frozen] = []  # it also processes events: frozen in mid-iteration, maybe
    for _ in range(CYCLES):
        cluster.send(BATCH // 4)
        leader = by_pid(workers, leaders[-1])
        other = next(w for w in workers if w is not leader)
        before = demoted(leader)
        held = cluster.partitions_of(leader)
        pause(leader)
        stopped_at = cluster.now()
        freezes.append((leader.proc.pid, stopped_at, held))
        wait_for(lambda: writer_after(cluster, stopped_at) is not None, 30)  # noqa: B023
        assert writer_after(cluster, stopped_at) == other.proc.pid
        wait_for(lambda: status_leader_pid(cluster) == other.proc.pid, 30)  # noqa: B023
        leaders.append(other.proc.pid)
        resumed_at = cluster.now()
        leader.signal(signal.SIGCONT)
        wait_for(lambda: demoted(leader) > before, 30)  # noqa: B023
        noticed_at = cluster.now()
        # Five more timer runs: time enough to see the demoted worker still writing.
        mark = len(leader_log(cluster))
        wait_for(lambda: len(leader_log(cluster)) >= mark + 5, 30)  # noqa: B023
        after_stop = [
            at for pid, at in leader_log(cluster) if pid == leader.proc.pid and at > stopped_at
        ]
        # The documented overlap: between SIGCONT and noticing. Nothing after, but for a
        # command the job had sent before it noticed, which Redis may run (and stamp) a
        # moment after the test saw the notice: IN_FLIGHT, well under a timer interval,
        # so a worker that went on leading would still be caught.
        assert all(resumed_at < at <= noticed_at + IN_FLIGHT for at in after_stop), (
            f"pid {leader.proc.pid} still runs leader jobs after its demotion: "
            f"{[(at - noticed_at) / 1e6 for at in after_stop]} s after it"
        )
        assert writer_after(cluster, noticed_at) == other.proc.pid

    finish(cluster, workers, *freezes)
    for w in workers:
        assert w.stop() == 0, w.output
