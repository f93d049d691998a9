"""The workflow role of a job store: enqueue a workflow whole, and follow it.

A store that offers it records a member's success and the release of the jobs waiting
for it in the same atomic step as the outcome itself (:meth:`JobStore.finish`), counting
each member once: a waiting job is queued exactly once. A member that ends DEAD or is
cancelled fails the workflow in the step that records that end.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from runnel.jobs.workflow_model import NewWorkflow, WorkflowRecord, WorkflowStatus
from runnel.store.identity import CallIdentity


class WorkflowStore(abc.ABC):
    """Workflows of one app's job queue (implemented by its :class:`JobStore`)."""

    @abc.abstractmethod
    async def enqueue_workflow(
        self, flow: NewWorkflow, *, call: CallIdentity | None = None
    ) -> bool:
        """Store the workflow and every job of it in one atomic step: those with nothing
        to wait for queued (SENT), the others WAITING. False (nothing stored) if the
        workflow's id or one of its jobs' ids exists already, unless the workflow was
        stored by this same ``call`` (a retry after a lost reply, as in
        :meth:`JobStore.enqueue`): True again."""

    @abc.abstractmethod
    async def workflow(self, workflow_id: str) -> WorkflowRecord | None:
        """The workflow and its members' statuses; None if there is none."""

    @abc.abstractmethod
    async def workflows(self, limit: int) -> list[WorkflowRecord]:
        """The most recent workflows still kept, newest first."""

    @abc.abstractmethod
    async def member_results(self, job_ids: Sequence[str]) -> list[tuple[str, bytes | None]]:
        """Each job's codec and stored result item (None if it has none)."""

    @abc.abstractmethod
    async def wait_workflow(self, workflow_id: str, within: float) -> bool:
        """Block up to ``within`` seconds until the workflow has ended; whether it has."""

    @abc.abstractmethod
    async def cancel_workflow(
        self, workflow_id: str, at: float, results_ttl: float
    ) -> WorkflowStatus:
        """End a running workflow as CANCELLED: its waiting jobs are cancelled at once
        (the error handler too), then its queued and running ones. Return the status it
        had; an ended one is left as it is."""
