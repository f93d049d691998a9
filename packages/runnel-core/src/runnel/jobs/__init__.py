"""The job queue: enqueue a function call, competing workers run it at least once, with
status, results, retries with backoff and dead letters (the fennel design, docs/jobs.md).

```python
@app.job(retries=3)
async def resize(image_id: int, width: int = 100) -> str:
    await report_progress(0.5, "resizing")   # result.progress() tells the caller
    ...

result = await resize.delay(7, width=200)    # or resize.delay_sync(7) without a loop
await result.get(timeout=10)                 # or: await result.cancel()

wf = chord(group(resize.s(i) for i in range(10)), report.s())   # workflows
await (await wf.delay()).get(timeout=30)
```
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runnel.lazy import lazy_names

_WHERE = {
    "AsyncJob": "runnel.jobs.function",
    "Chain": "runnel.jobs.workflow",
    "chain": "runnel.jobs.workflow",
    "Chord": "runnel.jobs.workflow",
    "chord": "runnel.jobs.workflow",
    "Clock": "runnel.jobs.clock",
    "current_job": "runnel.jobs.context",
    "ErrorInfo": "runnel.jobs.model",
    "Group": "runnel.jobs.workflow",
    "group": "runnel.jobs.workflow",
    "InvalidArguments": "runnel.jobs.model",
    "InvalidWorkflow": "runnel.jobs.workflow_model",
    "JobCancelled": "runnel.jobs.model",
    "JobContext": "runnel.jobs.context",
    "JobError": "runnel.jobs.model",
    "JobFailed": "runnel.jobs.model",
    "JobFunction": "runnel.jobs.function",
    "JobNotFound": "runnel.jobs.model",
    "JobRecord": "runnel.jobs.model",
    "JobResult": "runnel.jobs.result",
    "JobSignature": "runnel.jobs.workflow",
    "JobStatus": "runnel.jobs.model",
    "ManualClock": "runnel.jobs.clock",
    "Progress": "runnel.jobs.model",
    "report_progress": "runnel.jobs.context",
    "report_progress_sync": "runnel.jobs.context",
    "ResultsDisabled": "runnel.jobs.model",
    "SyncJob": "runnel.jobs.function",
    "SyncJobResult": "runnel.jobs.result",
    "SyncWorkflowResult": "runnel.jobs.workflow",
    "SystemClock": "runnel.jobs.clock",
    "Timeout": "runnel.jobs.model",
    "Workflow": "runnel.jobs.workflow",
    "WorkflowCancelled": "runnel.jobs.workflow_model",
    "WorkflowFailed": "runnel.jobs.workflow_model",
    "WorkflowMember": "runnel.jobs.workflow_model",
    "WorkflowRecord": "runnel.jobs.workflow_model",
    "WorkflowResult": "runnel.jobs.workflow",
    "WorkflowStatus": "runnel.jobs.workflow_model",
}
"""Where each name lives: imported on first use (PEP 562), so that importing one module
of the package (the queue names the settings check, say) does not import them all."""

if TYPE_CHECKING:
    from runnel.jobs.clock import Clock, ManualClock, SystemClock
    from runnel.jobs.context import (
        JobContext,
        current_job,
        report_progress,
        report_progress_sync,
    )
    from runnel.jobs.function import AsyncJob, JobFunction, SyncJob
    from runnel.jobs.model import (
        ErrorInfo,
        InvalidArguments,
        JobCancelled,
        JobError,
        JobFailed,
        JobNotFound,
        JobRecord,
        JobStatus,
        Progress,
        ResultsDisabled,
        Timeout,
    )
    from runnel.jobs.result import JobResult, SyncJobResult
    from runnel.jobs.workflow import (
        Chain,
        Chord,
        Group,
        JobSignature,
        SyncWorkflowResult,
        Workflow,
        WorkflowResult,
        chain,
        chord,
        group,
    )
    from runnel.jobs.workflow_model import (
        InvalidWorkflow,
        WorkflowCancelled,
        WorkflowFailed,
        WorkflowMember,
        WorkflowRecord,
        WorkflowStatus,
    )


__getattr__, __dir__ = lazy_names("runnel.jobs", _WHERE, globals())


__all__ = [
    "AsyncJob",
    "Chain",
    "Chord",
    "Clock",
    "ErrorInfo",
    "Group",
    "InvalidArguments",
    "InvalidWorkflow",
    "JobCancelled",
    "JobContext",
    "JobError",
    "JobFailed",
    "JobFunction",
    "JobNotFound",
    "JobRecord",
    "JobResult",
    "JobSignature",
    "JobStatus",
    "ManualClock",
    "Progress",
    "ResultsDisabled",
    "SyncJob",
    "SyncJobResult",
    "SyncWorkflowResult",
    "SystemClock",
    "Timeout",
    "Workflow",
    "WorkflowCancelled",
    "WorkflowFailed",
    "WorkflowMember",
    "WorkflowRecord",
    "WorkflowResult",
    "WorkflowStatus",
    "chain",
    "chord",
    "current_job",
    "group",
    "report_progress",
    "report_progress_sync",
]
