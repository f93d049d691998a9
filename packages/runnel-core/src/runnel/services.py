"""What an app hands down to what it declares, instead of being climbed back to.

Streams, processors, job functions, job results and executors need a few things of their
app: its name and settings, its store (for the event loop they run in), the job queue, the
clock. :class:`Services` names exactly those; :class:`runnel.App` is the one that
provides them, but nothing below it imports it, so the parts stay testable alone and the
modules import in one direction (app -> declarations -> services -> store).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from runnel.jobs.batching import EnqueueBatches
    from runnel.jobs.clock import Clock
    from runnel.jobs.portal import Portal
    from runnel.settings import Settings
    from runnel.store.backend import Backend
    from runnel.store.identity import Producer
    from runnel.store.jobs import JobStore


class Services(Protocol):
    """An app's services, for the objects it declares."""

    @property
    def name(self) -> str:
        """The app's name: part of every key of its data."""

    @property
    def settings(self) -> Settings: ...

    @property
    def clock(self) -> Clock:
        """What the job queue takes the time from."""

    @property
    def store(self) -> Backend:
        """The app's store, for the running event loop."""

    @property
    def producer(self) -> Producer:
        """The identities of the app's append calls (random per instance and process)."""

    @property
    def job_store(self) -> JobStore:
        """The app's job queue in the store, for the running event loop."""

    @property
    def enqueuer(self) -> EnqueueBatches:
        """Enqueues jobs, coalescing concurrent calls (running event loop)."""

    @property
    def portal(self) -> Portal:
        """The event loop that synchronous callers (``delay_sync``) run in."""

    def connected(self) -> AbstractAsyncContextManager[None]:
        """Hold this event loop's connections open while the block runs."""

    async def aclose(self) -> None:
        """Close this event loop's connections."""
