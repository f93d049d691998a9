"""What a test run catches from its workers' logs: each exception a processor raised,
with where it happened (the consumer logs each one with the partition and entry)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Failure:
    """A processor raised: where, and the exception (under any exception policy)."""

    processor: str
    stream: str
    partition: int
    entry_id: str | None
    exception: BaseException
    message: str
    """The worker's log line about it (what it did: retried, ignored, quarantined, halted)."""


class FailureLog(logging.Handler):
    """Keeps the failures the app's processors report (the consumer logs each one, with
    the exception and where it happened)."""

    def __init__(self, processors: Iterable[str]) -> None:
        super().__init__(logging.DEBUG)
        self.processors = set(processors)
        self.caught: list[Failure] = []

    def emit(self, record: logging.LogRecord) -> None:
        name = getattr(record, "processor", None)
        if name not in self.processors:
            return
        exception = record.exc_info[1] if record.exc_info else None
        if exception is None:  # a retry's line names the exception among its arguments
            args = record.args if isinstance(record.args, tuple) else ()
            exception = next((a for a in args if isinstance(a, BaseException)), None)
        if exception is None:
            return
        self.caught.append(
            Failure(
                processor=str(name),
                stream=str(getattr(record, "stream", "")),
                partition=int(getattr(record, "partition", -1)),
                entry_id=getattr(record, "entry_id", None),
                exception=exception,
                message=record.getMessage(),
            )
        )
