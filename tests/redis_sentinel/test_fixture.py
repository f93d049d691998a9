"""The sentinel setup itself: a failover and a killed master settle back."""

from __future__ import annotations

from tests.support.sentinel import SentinelGroup


def test_a_failover_and_a_kill_settle(sentinels: SentinelGroup) -> None:
    first = sentinels.master_port()
    second = sentinels.failover()
    assert second != first
    killed = sentinels.kill_master()
    assert killed.port == second and sentinels.master_port() == first
    sentinels.revive(killed)
