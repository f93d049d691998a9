"""What the reports read of an app: its services and what it declares.

A Protocol rather than :class:`runnel.App`, so that the read models stay below the app
(imports go app -> admin, never back) and can be given any object that has these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from runnel.services import Services

if TYPE_CHECKING:
    from runnel.background import BackgroundTask
    from runnel.jobs.function import JobFunction
    from runnel.processor import Processor
    from runnel.stream import Stream
    from runnel.tables import TableBase


class Declarations(Services, Protocol):
    """An app's services and its declarations (streams, processors, tables, jobs, schedule)."""

    @property
    def streams(self) -> Mapping[str, Stream]:
        """The app's streams, by name."""

    @property
    def processors(self) -> Mapping[str, Processor]:
        """The app's processors (``values()`` gives each once)."""

    @property
    def jobs(self) -> Mapping[str, JobFunction[Any, Any]]:
        """The job queue's functions, by name."""

    @property
    def background(self) -> Sequence[BackgroundTask]:
        """Tasks, timers and crontabs."""

    @property
    def tables(self) -> Mapping[str, TableBase]:
        """The app's tables, by name."""
