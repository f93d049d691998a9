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
