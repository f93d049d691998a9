"""What ``wait_replicas`` asks of a write: a module of its own, so that every writer (the
transport, the job store it builds, the partition logs) can check a WAIT reply."""

from __future__ import annotations

from runnel.exceptions import NotReplicated


def check_replicated(acknowledged: int, wanted: int, timeout_ms: int, where: str = "") -> None:
    """Raise :class:`NotReplicated` when WAIT reported fewer replicas than wanted."""
    if acknowledged < wanted:
        raise NotReplicated(
            f"the write is in Redis{where}, but only {acknowledged} of the {wanted} replicas "
            f"asked for (wait_replicas) acknowledged it within {timeout_ms} ms (wait_timeout); "
            "it may be lost if that master fails now",
            wanted,
            acknowledged,
        )
