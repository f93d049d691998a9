"""What ``runnel jobs show`` and the dashboard tell of a workflow."""

from __future__ import annotations

from collections import Counter
from typing import Any

from runnel.admin.declarations import Declarations
from runnel.admin.jobs import iso
from runnel.jobs.workflow import results_of
from runnel.jobs.workflow_model import WorkflowRecord, WorkflowStatus
from runnel.store.workflows import WorkflowStore


def flow_store(app: Declarations) -> WorkflowStore | None:
    """The app's store's workflow role, or None if it offers none."""
    store = app.job_store
    return store if isinstance(store, WorkflowStore) else None


async def find_workflow(app: Declarations, workflow_id: str) -> WorkflowRecord | None:
    store = flow_store(app)
    return None if store is None else await store.workflow(workflow_id)


async def recent_workflows(app: Declarations, limit: int) -> list[WorkflowRecord]:
    store = flow_store(app)
    return [] if store is None else await store.workflows(limit)


def tally(record: WorkflowRecord) -> str:
    """Its members' statuses counted: ``SUCCESS 12, EXECUTING 3``."""
    counts = Counter(str(m.status) for m in record.members)
    return ", ".join(f"{status} {n}" for status, n in counts.most_common())


async def describe_workflow(app: Declarations, record: WorkflowRecord) -> dict[str, Any]:
    """What ``runnel jobs show --json`` prints of a workflow (its result once COMPLETE,
    decoded where it can be: a failure to read it is shown, not raised)."""
    failed = record.member(record.failed) if record.failed else None
    report: dict[str, Any] = {
        "workflow": record.id,
        "shape": record.shape,
        "status": str(record.status),
        "created": iso(record.created),
        "finished": iso(record.finished),
        "failed": None
        if record.failed is None
        else {
            "id": record.failed,
            "name": failed.name if failed is not None else None,
            "error": record.error,
        },
        "members": [
            {
                "id": m.id,
                "name": m.name,
                "status": str(m.status),
                "on_error": m.id == record.on_error,
            }
            for m in record.members
        ],
    }
    store = flow_store(app)
    if record.status is WorkflowStatus.COMPLETE and store is not None:
        try:
            report["result"] = await results_of(store, record.result)
        except Exception as exc:  # expired, or user data: shown, not fatal
            report["result"] = f"<cannot read: {exc}>"
    return report
