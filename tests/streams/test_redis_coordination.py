"""Redis coordination: the keys it keeps locks, heartbeats, membership, control messages
and the leader in, with the expiries given, and how its fenced read is built (a WATCH
on the locks). What any store must do is the contract suite's (tests/contract)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import redis

from runnel.exceptions import TransportError
from runnel.store.coordination import Member, Members
from runnel.store.log import NEW, PENDING, PartitionId
from runnel.store.state import Commit
from runnel_redis import keys, resp
from runnel_redis.transport import RedisTransport
from tests.support.apps import HANG_GUARD, eventually
from tests.support.coordination_keys import (
    CONSUMER,
    GROUP,
    PROC,
    STREAM,
    beat_key,
    coordination,
    lock_key,
    membership,
    pending_ids,
    poll,
    stream_key,
)


async def test_locks_and_heartbeats_are_keys_with_the_ttl_given(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    c = coordination(transport, app_name)
    assert await c.acquire("a", [0, 1, 2], 10_000) == {0, 1, 2}
    assert await c.acquire("b", [1, 2, 3], 10_000) == {3}
    assert redis_client.get(lock_key(app_name, 1)) == b"a"
    assert 0 < redis_client.pttl(lock_key(app_name, 3)) <= 10_000

    # Our own lock is refreshed...
    redis_client.pexpire(lock_key(app_name, 0), 1_000)
    assert await c.acquire("a", [0], 600_000) == {0}
    assert redis_client.pttl(lock_key(app_name, 0)) > 1_000
    # ...someone else's is neither taken nor extended.
    redis_client.pexpire(lock_key(app_name, 1), 50_000)
    assert await c.acquire("b", [1], 600_000) == set()
    assert redis_client.get(lock_key(app_name, 1)) == b"a"
    assert redis_client.pttl(lock_key(app_name, 1)) <= 50_000

    # A beat sets the heartbeat key and extends our locks only.
    redis_client.pexpire(lock_key(app_name, 0), 1_000)
    redis_client.pexpire(lock_key(app_name, 3), 5_000)
    assert await c.beat("a", [0, 1, 2, 3], 30_000) == {0, 1, 2}
    assert redis_client.get(beat_key(app_name, "a")) == b"a"
    assert 0 < redis_client.pttl(beat_key(app_name, "a")) <= 30_000
    assert redis_client.pttl(lock_key(app_name, 0)) > 1_000  # ours: extended
    assert redis_client.pttl(lock_key(app_name, 3)) <= 5_000  # b's: left alone

    await c.beat("b", [], 100)  # a short ttl: b stops beating now
    assert 0 < redis_client.pttl(beat_key(app_name, "b")) <= 100

    async def b_expired() -> bool:
        return await c.alive(["a", "b"]) == {"a"}

    await poll(b_expired, "b's heartbeat expired")
    assert not redis_client.exists(beat_key(app_name, "b"))


async def test_change_members_is_serialized_by_the_admin_lock(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    c = coordination(transport, app_name)
    admin = lock_key(app_name, "admin")
    control = f"__ctrl:{app_name}.{STREAM}.{PROC}"

    def append(i: int) -> Callable[[Members], Members]:
        def change(members: Members) -> Members:
            log = members.get("log", Member())
            return {**members, "log": Member(partitions=[*log.partitions, i])}

        return change

    await asyncio.gather(*(c.change_members(append(i), f"reason{i}", f"e{i}") for i in range(20)))
    items = membership(redis_client, app_name)["log"]["partitions"]
    assert sorted(items) == list(range(20))
    assert {k: m.to_json() for k, m in (await c.members()).items()} == membership(
        redis_client, app_name
    )
    assert not redis_client.exists(admin)

    # One control message per change, on the control stream's key; its newest is the tail.
    messages = redis_client.xrange(control)
    assert len(messages) == 20
    assert {(m[b"reason"], m[b"executor"]) for _, m in messages} == {
        (f"reason{i}".encode(), f"e{i}".encode()) for i in range(20)
    }
    assert await c.control_tail() == messages[-1][0]

    # While someone else holds the admin lock, a change waits for it.
    redis_client.set(admin, "someone", px=60_000)
    waiting = asyncio.create_task(c.change_members(append(99), "blocked", "x"))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    assert 99 not in membership(redis_client, app_name)["log"]["partitions"]
    assert redis_client.get(admin) == b"someone"
    redis_client.delete(admin)
    async with asyncio.timeout(HANG_GUARD):
        members = await waiting
    assert members["log"].partitions[-1] == 99
    assert membership(redis_client, app_name) == {k: m.to_json() for k, m in members.items()}
    assert redis_client.xlen(control) == 21

    # A failing change writes nothing, announces nothing and frees the admin lock.
    def broken(members: Members) -> Members:
        raise ValueError("broken change")

    with pytest.raises(ValueError, match="broken change"):
        await c.change_members(broken, "broken", "x")
    assert membership(redis_client, app_name) == {k: m.to_json() for k, m in members.items()}
    assert redis_client.xlen(control) == 21
    assert not redis_client.exists(admin)


async def _partitions_with_entries(
    transport: RedisTransport, app: str, n: int
) -> list[PartitionId]:
    streams = [stream_key(app, p) for p in range(n)]
    await transport.ensure_group(streams, GROUP)
    for key in streams:
        await transport.append([(key, {b"n": str(i).encode()}) for i in range(3)])
    return streams


async def test_leadership_is_a_key_a_claim_refreshes(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    election = transport.leadership(app_name)
    assert await election.claim("a", 10_000)
    assert redis_client.get(f"__lead:{app_name}") == b"a"
    redis_client.pexpire(f"__lead:{app_name}", 1_000)
    assert await election.claim("a", 600_000)  # staying leader refreshes the claim
    assert redis_client.pttl(f"__lead:{app_name}") > 1_000
    await election.resign("a")
    assert await transport.leadership(app_name).claim("b", 100)
    await eventually(lambda: not redis_client.exists(f"__lead:{app_name}"), "b's claim expired")


async def test_read_is_refused_when_a_lock_changes_between_check_and_read(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    """The WATCH half of the fence: a lock taken over after the check (here by a command
    slipped in right after it, as a stand-in for another process) and Redis refuses the
    read; the next attempt's check sees the lock is gone."""
    c = coordination(transport, app_name)
    [k0] = await _partitions_with_entries(transport, app_name, 1)
    assert await c.acquire("a", [0], 30_000) == {0}
    lock = c.lock_key(0)
    exchanges: list[list] = []
    real = c.inner._exchange
    multi = resp.command("MULTI")

    async def stealing(packed: bytes, replies: int) -> list:
        if not exchanges:  # once: after the check, "b" takes the lock
            packed = packed.replace(multi, resp.command("SET", lock, "b") + multi, 1)
            replies += 1
        got = await real(packed, replies)
        exchanges.append(got)
        return got

    c.inner._exchange = stealing  # type: ignore[method-assign]
    result = await c.read("a", CONSUMER, {k0: NEW}, 10)
    assert exchanges[0][1] == [1]  # the check passed...
    assert exchanges[0][-1] is None  # ...and Redis refused the read all the same
    assert exchanges[1][1] == [0]  # the second attempt's check saw it
    assert (result.entries, result.lost) == ([], [k0])
    assert pending_ids(redis_client, k0, GROUP) == []
    assert redis_client.get(lock) == b"b"


async def test_read_leaves_the_expiry_of_other_locks_alone(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    """The check touches locks that are not ours only so that Redis refuses the read: a
    lock held by another keeps its expiry, a free one stays free (no key)."""
    c = coordination(transport, app_name)
    k0, k1, k2 = await _partitions_with_entries(transport, app_name, 3)
    assert await c.acquire("a", [0], 30_000) == {0}
    assert await c.acquire("b", [1], 30_000) == {1}
    for others in ({k1: NEW}, {k2: NEW}, {k1: NEW, k2: NEW}):
        await c.read("a", CONSUMER, {k0: PENDING, **others}, 10)
    assert redis_client.get(c.lock_key(1)) == b"b"
    assert 29_000 < redis_client.pttl(c.lock_key(1)) <= 30_000
    assert not redis_client.exists(c.lock_key(2))


async def test_read_errors_keep_the_redis_error(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    """A stream without its group: the NOGROUP reply of the transaction is raised as a
    TransportError that is still redis-py's ResponseError."""
    c = coordination(transport, app_name)
    assert await c.acquire("a", [0], 30_000) == {0}
    key = stream_key(app_name, 0)
    redis_client.xadd(keys.partition(*key), {"n": "0"})  # a stream, but no group
    with pytest.raises(redis.ResponseError, match="NOGROUP") as raised:
        await c.read("a", CONSUMER, {key: NEW}, 10)
    assert isinstance(raised.value, TransportError)


async def test_a_read_commits_after_the_server_forgot_the_script(
    transport: RedisTransport, app_name: str, redis_client: redis.Redis
) -> None:
    """A commit rides in the read's transaction by EVALSHA: a server that no longer knows
    the script (restarted, SCRIPT FLUSH) runs the rest of the transaction, and the commit
    is then sent whole on its own, so that the writes and acknowledgements still land."""
    c = coordination(transport, app_name)
    [k0] = await _partitions_with_entries(transport, app_name, 1)
    assert await c.acquire("a", [0], 30_000) == {0}
    first = await c.read("a", CONSUMER, {k0: NEW}, 2)
    ids = [xid for xid, _ in first.entries[0][1]]
    redis_client.script_flush()
    commit = Commit(ids=ids, writes={"totals": {b"k": b"7"}})
    result, lost = await c.read_and_commit("a", CONSUMER, {k0: NEW}, 10, {k0: commit})
    assert lost == [] and [len(e) for _, e in result.entries] == [1]
    assert pending_ids(redis_client, k0, GROUP) == [result.entries[0][1][0][0]]
    assert redis_client.hget(c.table_key("totals", k0), b"k") == b"7"
