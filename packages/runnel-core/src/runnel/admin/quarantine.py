"""A quarantined partition let go on: skip its poison event, or resume it as it is (what
``runnel processor skip`` and ``resume`` do, and the dashboard's buttons)."""

from __future__ import annotations

from runnel.exceptions import RunnelError
from runnel.processor import Processor
from runnel.store.backend import admin_of
from runnel.store.coordination import Coordination
from runnel.store.log import PartitionId


def coordination(proc: Processor) -> Coordination:
    return proc.app.store.coordination(proc.app.name, proc.stream.name, proc.name)


async def skip_event(proc: Processor, number: int, xid: str | None, by: str) -> str:
    """Acknowledge the oldest unacknowledged event of partition ``number`` without
    processing it and lift its quarantine; the id skipped. Only that event is ever
    skipped: ``xid`` must be it; without ``xid`` the partition must be quarantined and
    stopped on it (so that a stale page skips nothing else). ``by`` names who asks."""
    key = proc.stream.partitions[number].id
    admin = admin_of(proc.app.store)
    first = await admin.first_pending(key, proc.name)
    if first is None:
        raise RunnelError(f"partition {number} of {proc.name} has no pending event")
    if xid is None:
        stopped = (await coordination(proc).quarantined()).get(key)
        if stopped is None:
            raise RunnelError(f"partition {number} of {proc.name} is not quarantined")
        if stopped.id is None:
            raise RunnelError(f"partition {number} of {proc.name} stopped on no known event")
        xid = stopped.id
    if first.decode() != xid:
        raise RunnelError(
            f"{xid} is not the first pending event of partition {number} of "
            f"{proc.name} (that is {first.decode()}); nothing skipped"
        )
    await admin.ack(key, proc.name, [first])
    await coordination(proc).lift([key], by)
    return xid


async def resume_partitions(proc: Processor, number: int | None, by: str) -> list[int]:
    """Lift the quarantine of partition ``number`` (all when None); the numbers lifted."""
    partitions = None if number is None else [PartitionId(proc.app.name, proc.stream.name, number)]
    return [p.number for p in await coordination(proc).lift(partitions, by)]
