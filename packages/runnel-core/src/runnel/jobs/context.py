"""``current_job()``: which job the running code belongs to (id, name, which try)."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class JobContext:
    id: str
    name: str
    tries: int
    """Tries started so far, this one included (1 on the first run)."""
    retries: int
    """Retries allowed after the first try."""

    @property
    def last_try(self) -> bool:
        """Whether a failure now makes the job DEAD rather than retried."""
        return self.tries > self.retries


_current: ContextVar[JobContext | None] = ContextVar("runnel_current_job", default=None)


def current_job() -> JobContext | None:
    """The job being run by this task or thread, or None outside a job."""
    return _current.get()
