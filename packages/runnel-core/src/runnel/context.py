"""Where the running code is, as context variables (runnel 0.1's ``runnel.context``).

A worker sets ``worker_id``; each partition's consumer sets ``stream`` (the stream's
name), ``partition_id`` (its number) and ``executor_id`` (the processor's name), so a
processor or a log filter can read them with ``.get()``. Outside a worker they are None.
"""

from __future__ import annotations

from contextvars import ContextVar

worker_id: ContextVar[str | None] = ContextVar("runnel_worker_id", default=None)
executor_id: ContextVar[str | None] = ContextVar("runnel_executor_id", default=None)
stream: ContextVar[str | None] = ContextVar("runnel_stream", default=None)
partition_id: ContextVar[int | None] = ContextVar("runnel_partition_id", default=None)

__all__ = ["executor_id", "partition_id", "stream", "worker_id"]
