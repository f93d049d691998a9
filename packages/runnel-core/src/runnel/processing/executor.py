"""The executor: one processor's share of the partitions of its stream.

Read top to bottom, :meth:`Executor.run` is the whole life of an executor:

    set up consumer groups
    wait join_delay if others are alive, then join
                                    (add ourselves to the membership, announce "join")
    until stopped, concurrently:
        rebalance   whenever told   (revoke what is no longer ours, lock and start what is)
        heartbeat   every ttl/3     (refresh our beat, extend our locks, notice lost ones)
        maintenance every ttl/2     (drop members whose heartbeat expired, announce "dead")
        control     always          (a control message means: rebalance)
    leave                           (drop ourselves, finish in-flight work, acknowledge,
                                     release the locks, announce "leave")

The assignment itself is :func:`runnel.rebalance.assign`: a pure function of the
membership, so every executor computes the same answer.

The executor is the only part that knows the others. It wires each one to narrow
collaborators: the consumers and events check a :class:`Lease` that the heartbeat
extends; acknowledgements go to an ack sink (``Coordination.ack`` for our id); the
fetcher reads through a :class:`Source`; and all of them report a lost partition
through one callback, :meth:`Executor.lost`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from runnel.exceptions import AccessDenied, Misconfigured, RunnelError, TransportError
from runnel.processing.acks import Acknowledger, Acks
from runnel.processing.consumer import Consumer
from runnel.processing.fetcher import Fetcher, StoreSource
from runnel.processing.inbox import Inbox
from runnel.processing.lease import LEASE_MARGIN, Lease
from runnel.processing.runner import Runner
from runnel.rebalance import assign
from runnel.runtime.retry import (
    BLOCK_CAP_MS,
    Backoff,
    Stopped,
    outage,
    reraise_if_cancelled,
    retrying,
    until_stopped,
)
from runnel.store.coordination import Member, Members
from runnel.store.log import PartitionId
from runnel.store.state import Commit
from runnel.tables.partition import CacheBudget, PartitionState
from runnel.tables.table import check_partition_counts
from runnel.types import Partition

if TYPE_CHECKING:
    from runnel.metrics.stats import ProcessorStats, WorkerStats
    from runnel.processor import Processor
    from runnel.runtime.health import Health

log = logging.getLogger("runnel.executor")

CONSUMER_NAME = "runnel"
"""The consumer-group consumer every owner reads as.

Ownership of a partition is decided by Runnel's locks, not by the consumer group, so all
owners share one consumer name: the partition's unacknowledged entries are then always
"ours" to re-read, in order, whoever read them first.
"""

__all__ = ["CONSUMER_NAME", "LEASE_MARGIN", "Executor", "Host"]


class Host(Protocol):
    """What an executor needs of the worker that runs it."""

    id: str
    stats: WorkerStats
    health: Health
    failure: BaseException | None

    def stop(self, exit_code: int = 0, reason: str = "stop requested") -> None: ...


class Executor:
    def __init__(self, worker: Host, processor: Processor) -> None:
        self.worker = worker
        self.processor = processor
        self.id = f"{uuid.uuid4().hex[:12]}"
        self.store = processor.app.store
        self.log = self.store.log
        self.coordination = self.store.coordination(
            processor.app.name, processor.stream.name, processor.name
        )
        self.group = processor.name
        self.budgets: dict[str, CacheBudget] = {}  # table caches, shared by our partitions
        self.consumer_name = CONSUMER_NAME
        self.ttl_ms = int(processor.lock_expiry * 1000)
        self.stats: ProcessorStats = worker.stats.processor(processor)
        self.lease = Lease(processor.lock_expiry)
        self.health = worker.health.check(
            f"processor {processor.name}", processor.lock_expiry, "joining its group"
        )
        """Readiness: heartbeats answered, and a member of the processor's group."""
        self.acknowledger = Acknowledger(self._ack, self.lost)
        source = StoreSource(self.coordination, self.log, self.id, self.consumer_name, self.group)
        fetcher = Fetcher(
            {},
            source,
            lost=self.lost,
            stats=self.stats,
            group=self.group,
            block_ms=processor.read_timeout,
        )
        self.runner = Runner(
            fetcher,
            self._consumer_for,
            prefetch=processor.prefetch_count,
            grace_period=processor.grace_period,
            name=processor.name,
            partitions=processor.stream.partition_count,
        )
        self._stop = asyncio.Event()
        self._rebalance = asyncio.Event()
        self._lost: set[int] = set()
        self._lost_seen: dict[int, int] = {}
        """Per owned partition: its count of events trimmed unread, as last reported."""

    def _consumer_for(self, partition: Partition, inbox: Inbox) -> Consumer:
        """A partition was assigned: its consumer, wired to ours (lease, acks, halt), with
        a fresh state of its tables (what an earlier owner left is read from the store)."""
        stats = self.stats.partition(partition.number)
        state = self._state_for(partition)
        acks = Acks(partition.id, stats, self._ack, self.lost, self.acknowledger.wake, state)
        acks.batch = self.processor.prefetch_count
        acks.commits_ride = self.coordination.commits_ride
        inbox.acks = acks  # the partition's reads carry its acknowledgements
        return Consumer(
            self.processor,
            partition,
            inbox,
            acks,
            self.lease,
            halt=self.halt,
            quarantine=self._quarantine,
            make_state=lambda: self._state_for(partition, needed=True),
        )

    async def _check_tables(self) -> None:
        store = self.store.table_store(self.processor.app.name)
        if store is None:
            raise Misconfigured(f"{type(self.store).__name__} keeps no tables")
        await check_partition_counts(store, self.processor.stream.tables)

    def _state_for(self, partition: Partition, needed: bool = False) -> PartitionState | None:
        """The partition's state: when its stream has tables, or ``needed`` (a processor
        sends with ``events.send``)."""
        tables = self.processor.stream.tables
        if not tables and not needed:
            return None
        store = self.store.table_store(self.processor.app.name)
        if store is None:
            raise Misconfigured(f"{type(self.store).__name__} keeps no tables")
        limit = self.processor.app.settings.table_cache_size
        return PartitionState(
            partition, tables, store, self.processor.name, limit, self.stats, self.budgets
        )

    async def _ack(self, commits: Mapping[PartitionId, Commit]) -> list[PartitionId]:
        """The ack sink of our partitions: applied only where we hold the lock."""
        if not any(c.writes or c.sends or c.deadlines for c in commits.values()):
            return await self.coordination.ack(self.id, {p: c.ids for p, c in commits.items()})
        lost = await self.coordination.commit(self.id, commits)
        sent = [p for p, c in commits.items() if c.sends and p not in lost]
        if sent:
            await self._relay(sent)
        return lost

    async def _relay(self, partitions: Sequence[PartitionId]) -> None:
        """Deliver committed outputs the store keeps in an outbox (a Redis Cluster); a
        failure leaves them there for the next commit, or the next maintenance, to relay."""
        try:
            await self.coordination.relay(partitions)
        except TransportError as exc:
            reraise_if_cancelled(exc)
            outage.failed(f"{self!r} relaying outputs", exc)

    async def _quarantine(self, partition: PartitionId, entry_id: str | None, error: str) -> None:
        await self.coordination.quarantine(partition, entry_id, error)

    def __repr__(self) -> str:
        return f"<Executor {self.processor.name} {self.id}>"

    # Told from outside.

    def stop(self) -> None:
        """Start no new iteration from now on; then leave (see :meth:`run`)."""
        self._stop.set()
        self.runner.quiesce()

    def halt(self, exc: BaseException) -> None:
        """HALT policy: a processor failed, so this worker stops (and exits non-zero)."""
        self.worker.failure = self.worker.failure or exc
        self.worker.stop(exit_code=1, reason=f"processor {self.processor.name!r} failed: {exc!r}")

    def lost(self, partition: PartitionId) -> None:
        """The store says we no longer hold this partition's lock: stop it at once (the
        rebalancer then retires its consumer)."""
        for number, (consumer, _) in self.runner.consumers.items():
            if consumer.partition.id == partition and number not in self._lost:
                log.warning("%r: lost the lock of partition %d; stopping it", self, number)
                consumer.stop()
                self._lost.add(number)
        self._rebalance.set()

    # Leases: may a consumer start another iteration?

    def lease_valid(self) -> bool:
        return self.lease.valid()

    # The life of an executor.

    async def run(self) -> None:
        keys = [p.id for p in self.processor.stream.partitions]
        if not await self._until_stopped(self._setup(keys)) or self._stop.is_set():
            return
        if await self._others_alive():
            await self._until_stopped(asyncio.sleep(self.processor.join_delay))
        async with asyncio.TaskGroup() as tg:
            running = tg.create_task(self.runner.run(), name="runner")
            acknowledging = tg.create_task(self.acknowledger.run(), name="acknowledger")
            # Beat from before joining: a slow join must not look like a dead member.
            beating = tg.create_task(self._heartbeat(), name="heartbeat")
            if not self._stop.is_set() and await self._until_stopped(self._join()):
                loops = [
                    beating,
                    tg.create_task(self._maintenance(), name="maintenance"),
                    tg.create_task(self._control(), name="control"),
                    tg.create_task(self._rebalancer(), name="rebalance"),
                ]
                await self._stop.wait()
                loops[-1].cancel()  # no more rebalancing; keep beating while we leave
                await self._leave()
                for task in loops:
                    task.cancel()
            beating.cancel()
            self.runner.stop()
            await running
            acknowledging.cancel()  # the consumers drained their acknowledgements when stopping

    async def _until_stopped(self, coro: Coroutine[Any, Any, Any]) -> bool:
        """Await ``coro`` unless a stop comes first; True if it completed."""
        try:
            await until_stopped(coro, self._stop)
        except Stopped:
            return False
        return True

    def _ids(self, numbers: Iterable[int]) -> list[PartitionId]:
        partitions = self.processor.stream.partitions
        return [partitions[n].id for n in numbers]

    async def _setup(self, keys: list[PartitionId]) -> None:
        log_ = self.log
        stream = self.processor.stream
        try:
            await retrying(lambda: stream.prepare(writing=False), "loading schemas")
        except AccessDenied:
            raise  # the worker stops on it, saying who was refused what
        except RunnelError as exc:
            # An incompatible schema: refuse to start rather than fail on every event.
            log.error("processor %r cannot start: %s", self.processor.name, exc)
            self.worker.stop(exit_code=1, reason=f"processor {self.processor.name!r}: {exc}")
            return
        if stream.tables:
            try:
                await retrying(self._check_tables, "checking the tables")
            except Misconfigured as exc:
                log.error("processor %r cannot start: %s", self.processor.name, exc)
                self.worker.stop(exit_code=1, reason=f"processor {self.processor.name!r}: {exc}")
                return
        await retrying(lambda: log_.ensure_group(keys, self.group), "creating consumer groups")
        for key in keys:
            adopt = partial(log_.adopt_pending, key, self.group, self.consumer_name)
            moved = await retrying(adopt, "adopting pending events")
            if moved:
                name = log_.partition_key(key)
                log.info("%s: %d unacknowledged events will be redelivered first", name, moved)

    async def _others_alive(self) -> bool:
        """Whether another executor of this processor is alive, so that joining waits
        ``join_delay``: the delay is there for the others (a worker failing at start moves
        none of their partitions), so an executor alone joins at once. Two that start
        alone together both join at once, as two joining after the delay would: the admin
        lock orders their changes and a partition's lock has one holder at a time."""
        if not self.processor.join_delay:
            return False
        try:
            members = list(await self.coordination.members())
            return bool(members) and bool(await self.coordination.alive(members))
        except TransportError as exc:
            reraise_if_cancelled(exc)
            return True  # cannot tell: wait as before (joining retries until it can)

    async def _join(self) -> None:
        count = self.processor.stream.partition_count
        me = Member(host=socket.gethostname(), pid=os.getpid(), worker=self.worker.id)

        async def join() -> Members:
            # Members whose heartbeat has expired are dropped on the way in, so a worker
            # started after a crash does not leave the dead one's share idle.
            seen = list(await self.coordination.members())
            dead = set(seen) - await self.coordination.alive(seen)

            def add_me(members: Members) -> Members:
                # Only those we saw and found dead: one that joined since is kept.
                members = {k: v for k, v in members.items() if k not in dead}
                members[self.id] = me
                return _reassign(members, count)

            return await self.coordination.change_members(add_me, "join", self.id)

        await self._beat_once()  # alive before anyone can see us in the membership
        await retrying(join, "joining")
        self.health.hold(True)
        self._rebalance.set()
        log.info("%r joined", self)

    async def _leave(self) -> None:
        count = self.processor.stream.partition_count

        def remove_me(members: Members) -> Members:
            members = {k: v for k, v in members.items() if k != self.id}
            return _reassign(members, count)

        try:
            await self.coordination.change_members(remove_me, "leave", self.id)
        except TransportError as exc:
            reraise_if_cancelled()
            log.warning(
                "%r could not announce leaving (others will notice it is gone): %r", self, exc
            )
        owned = sorted(self.runner.owned)
        await self.runner.revoke(owned)
        try:
            await self.coordination.release(self.id, self._ids(range(count)))
            await self.coordination.announce("released", self.id)
        except TransportError as exc:
            reraise_if_cancelled()
            log.warning("%r could not release its locks (they will expire): %r", self, exc)
        log.info("%r left", self)

    # Rebalancing.

    async def _rebalancer(self) -> None:
        backoff = Backoff()
        while True:
            reraise_if_cancelled()
            await self._rebalance.wait()
            self._rebalance.clear()
            try:
                await self._rebalance_once()
                self.stats.rebalances += 1
                backoff.reset()
            except TransportError as exc:
                reraise_if_cancelled(exc)
                outage.failed(f"{self!r} rebalancing", exc)
                self._rebalance.set()
                await backoff.sleep()

    async def _rebalance_once(self) -> None:
        stream = self.processor.stream
        members = await self.coordination.members()
        if self.id not in members:
            # We were declared dead (paused, cut off): give everything up, then join again.
            log.warning("%r is no longer a member; rejoining", self)
            self.health.hold(False, "no longer a member of its group; rejoining")
            await self.runner.revoke(sorted(self.runner.owned), graceful=False)
            await self._join()
            return
        if self._lost:
            lost, self._lost = sorted(self._lost), set()
            await self.runner.revoke(lost, graceful=False)
        target = set(members[self.id].partitions)
        owned = self.runner.owned
        gone = sorted(owned - target)
        if gone:
            await self.runner.revoke(gone)
            await self.coordination.release(self.id, self._ids(gone))
            await self.coordination.announce("released", self.id)
        wanted = sorted(target - owned)
        attempt = 0
        while wanted and not self._rebalance.is_set() and not self._stop.is_set():
            got = {
                p.number
                for p in await self.coordination.acquire(self.id, self._ids(wanted), self.ttl_ms)
            }
            if got:
                # No lease extension here: the lease comes from heartbeats, which extend
                # every lock at once; a lock taken now expires later than the lease anyway.
                await self._forget_quarantines(got)
                await self.runner.assign([stream.partitions[n] for n in sorted(got)])
                wanted = [n for n in wanted if n not in got]
            if wanted:
                attempt += 1
                if attempt % self.processor.assignment_attempts == 0:
                    log.warning("%r still waiting for the locks of partitions %s", self, wanted)
                # Wait for the holder to release ("released" message) or the lock to expire.
                try:
                    async with asyncio.timeout(self.processor.assignment_sleep):
                        await self._rebalance.wait()
                except TimeoutError:
                    pass
        if target == self.runner.owned:
            log.info("%r owns partitions %s", self, sorted(target))

    async def _forget_quarantines(self, taken: set[int]) -> None:
        """A quarantine ends with its worker: the new owner tries the event again (and
        records the quarantine anew if it fails again)."""
        stale = {p.number for p in await self.coordination.quarantined()} & taken
        if stale:
            log.info("%r: trying quarantined partitions %s again", self, sorted(stale))
            await self.coordination.lift(self._ids(sorted(stale)), self.id)

    async def _resume_lifted(self) -> None:
        """Start again our quarantined partitions whose quarantine was lifted
        (``runnel processor resume`` or ``skip``)."""
        poisoned = [n for n, (c, _) in self.runner.consumers.items() if c.poisoned]
        if not poisoned:
            return
        held = {p.number for p in await self.coordination.quarantined()}
        lifted = [n for n in poisoned if n not in held]
        if lifted:
            log.info("%r: quarantine of partitions %s lifted; resuming them", self, lifted)
            await self.runner.restart(lifted)

    # Background loops.

    async def _beat_once(self) -> None:
        owned = sorted(self.runner.owned)
        started = time.monotonic()
        beat = self.coordination.beat(self.id, self._ids(owned), self.ttl_ms)
        held = await self.health.watch(beat)
        self.lease.extended(started)
        for number in set(owned) - {p.number for p in held}:
            self.lost(self.processor.stream.partitions[number].id)

    async def _heartbeat(self) -> None:
        interval = self.processor.lock_expiry / 3
        while True:
            reraise_if_cancelled()
            await asyncio.sleep(interval)
            try:
                await self._beat_once()
            except TransportError as exc:
                reraise_if_cancelled(exc)
                outage.failed(f"{self!r} heartbeat", exc)
                await asyncio.sleep(min(1.0, interval))

    async def _maintenance(self) -> None:
        interval = self.processor.lock_expiry / 2
        count = self.processor.stream.partition_count
        while True:
            reraise_if_cancelled()
            await asyncio.sleep(interval)
            try:
                await self._relay(self._ids(sorted(self.runner.owned)))
                await self._report_lost()
                await self._resume_lifted()  # in case the control message was missed
                members = await self.coordination.members()
                if self.id not in members:
                    # Dropped while we could not beat, or the store lost the membership
                    # (a Redis restarted empty): an executor owning no partition would
                    # not notice otherwise. The rebalancer joins again.
                    self.health.hold(False, "no longer a member of its group; rejoining")
                    self._rebalance.set()
                    continue
                alive = await self.coordination.alive(list(members))
                dead = set(members) - alive - {self.id}
                if not dead:
                    if set(members[self.id].partitions) != self.runner.owned:
                        self._rebalance.set()  # catch up if a control message was missed
                    continue
                log.warning("%r: executors %s stopped beating; reassigning", self, sorted(dead))

                def drop_dead(current: Members, dead: set[str] = dead) -> Members:
                    return _reassign({k: v for k, v in current.items() if k not in dead}, count)

                await self.coordination.change_members(drop_dead, "dead", self.id)
                self._rebalance.set()  # our own message does not wake our control loop
            except TransportError as exc:
                reraise_if_cancelled(exc)
                outage.failed(f"{self!r} maintenance", exc)

    async def _report_lost(self) -> None:
        """Log events of owned partitions trimmed before this processor read them (a
        stream with ``on_full="drop_oldest"`` at its size): each rise of the count."""
        owned = sorted(self.runner.owned)
        if not owned:
            return
        counts = await self.log.lost(self._ids(owned), self.group)
        for partition, count in counts.items():
            before = self._lost_seen.get(partition.number)
            self._lost_seen[partition.number] = count
            if count > (before or 0):
                log.warning(
                    "%r: %d events of partition %d were trimmed before it read them "
                    "(on_full=%r, partition_size %d): lost %d in all",
                    self,
                    count - (before or 0),
                    partition.number,
                    self.processor.stream.on_full,
                    self.processor.stream.partition_size,
                    count,
                )

    async def _control(self) -> None:
        position = await retrying(self.coordination.control_tail, "reading the control stream")
        block = min(self.processor.read_timeout, BLOCK_CAP_MS)
        while True:
            reraise_if_cancelled()
            try:
                position, messages = await self.coordination.control(position, block)
            except TransportError as exc:
                reraise_if_cancelled(exc)
                outage.failed(f"{self!r} reading the control stream", exc)
                await asyncio.sleep(1)
                continue
            if any(m.get("reason") == "resume" for m in messages):
                try:
                    await self._resume_lifted()
                except TransportError as exc:
                    reraise_if_cancelled()
                    log.warning("%r resuming quarantined partitions failed: %r", self, exc)
            if any(m.get("executor") != self.id for m in messages):
                self._rebalance.set()


def _reassign(members: Members, count: int) -> Members:
    """The membership with partitions spread again over its members."""
    previous = {k: v.partitions for k, v in members.items()}
    plan = assign(count, list(members), previous)
    return {k: replace(v, partitions=plan.get(k, [])) for k, v in members.items()}
