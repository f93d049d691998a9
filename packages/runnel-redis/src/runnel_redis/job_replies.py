"""Reading the replies of the job scripts (runnel_redis/jobs.py)."""

from __future__ import annotations

from typing import Any

from runnel.jobs.model import Delivery, QueueCounts
from runnel.jobs.queues import DEFAULT_QUEUE


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _split(ticket: bytes) -> str:
    """The queue of a ticket (``name/entry`` in a named queue)."""
    name, slash, _ = ticket.rpartition(b"/")
    return name.decode() if slash else DEFAULT_QUEUE


def counts_of(length: Any, pending: Any, scheduled: Any, dead: Any, first: Any) -> QueueCounts:
    """One queue's counts from its replies (an error reply: a stream not made yet)."""
    executing = 0 if isinstance(pending, Exception) else int(pending.get("pending", 0))
    length = 0 if isinstance(length, Exception) else int(length)
    return QueueCounts(
        queued=max(0, length - executing),
        executing=executing,
        scheduled=int(scheduled),
        dead=0 if isinstance(dead, Exception) else int(dead),
        results=0,
        next_due=first[0][1] / 1000 if first else None,
    )


def read_entries(reply: Any) -> list[tuple[bytes, bytes]]:
    """(entry id, job id) pairs from a raw XREADGROUP reply (RESP2 list or RESP3 map)."""
    if not reply:
        return []
    streams = reply.items() if isinstance(reply, dict) else reply
    out = []
    for _, read in streams:
        for entry, flat in read or []:
            fields = dict(zip(flat[::2], flat[1::2], strict=True)) if flat else {}
            out.append((entry, fields.get(b"id", b"")))
    return out


def deliveries(reply: Any) -> list[Delivery]:
    out = []
    for i in range(0, len(reply or ()), 8):
        entry, job_id, name, payload, codec_name, tries, retries, results = reply[i : i + 8]
        queue = _split(entry) if b"/" in entry else DEFAULT_QUEUE
        out.append(
            Delivery(
                ticket=entry,
                id=_text(job_id),
                name=_text(name or b""),
                payload=payload or b"",
                codec=_text(codec_name or b"json"),
                tries=int(tries),
                retries=int(retries or 0),
                results=results in (b"1", "1", 1),
                queue=queue,
            )
        )
    return out
