"""What ``@app.processor`` records: a function, its stream and how to run it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runnel.interfaces import Middleware
from runnel.types import ExceptionPolicy

if TYPE_CHECKING:
    from runnel.app import App
    from runnel.processing.events import Events
    from runnel.stream import Stream


@dataclass(eq=False)
class Processor:
    app: App
    stream: Stream
    func: Callable[[Events], Awaitable[Any]]
    name: str
    exception_policy: ExceptionPolicy
    middleware: Sequence[Middleware] = field(default_factory=list)
    lock_expiry: float = 30
    read_timeout: int = 500
    prefetch_count: int = 8
    assignment_attempts: int = 32
    assignment_sleep: float = 2
    grace_period: float = 8
    pool_size: int = 16
    join_delay: float = 2
    retries: int = 3
    retry_backoff: float = 0.5
    retry_backoff_cap: float = 30
    retry_jitter: float = 0
    fallback: ExceptionPolicy = ExceptionPolicy.HALT

    def __repr__(self) -> str:
        return f"<Processor {self.name} on {self.stream.name}>"

    async def __call__(self, events: Events) -> Any:
        return await self.func(events)
