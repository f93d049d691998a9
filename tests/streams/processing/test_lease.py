"""The lease a heartbeat extends and consumers check."""

from __future__ import annotations

import asyncio
import time

from runnel.processing.lease import LEASE_MARGIN, Lease


def test_a_new_lease_is_not_valid() -> None:
    assert not Lease(10.0).valid()


def test_a_heartbeat_extends_it_short_of_the_locks_expiry() -> None:
    lease = Lease(10.0)
    started = time.monotonic()
    lease.extended(started)
    assert lease.valid()
    assert lease.until == started + 10.0 * (1 - LEASE_MARGIN)


def test_a_heartbeat_sent_long_ago_does_not_make_it_valid() -> None:
    lease = Lease(10.0)
    lease.extended(time.monotonic() - 9.0)
    assert not lease.valid()


async def test_renewed_waits_for_the_next_heartbeat() -> None:
    lease = Lease(10.0)
    waiting = asyncio.create_task(lease.renewed(within=3600))
    await asyncio.sleep(0)
    assert not waiting.done()
    lease.extended(time.monotonic())
    assert await waiting is True


async def test_renewed_gives_up_when_no_heartbeat_comes() -> None:
    assert await Lease(10.0).renewed(within=0) is False
