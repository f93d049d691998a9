"""The job queue: enqueue a function call, competing workers run it at least once, with
status, results, retries with backoff and dead letters (the fennel design, docs/jobs.md).

```python
@app.job(retries=3)
async def resize(image_id: int, width: int = 100) -> str: ...

result = await resize.delay(7, width=200)    # or resize.delay_sync(7) without a loop
await result.get(timeout=10)
```
"""

from runnel.jobs.clock import Clock, ManualClock, SystemClock
from runnel.jobs.context import JobContext, current_job
from runnel.jobs.function import AsyncJob, JobFunction, SyncJob
from runnel.jobs.model import (
    ErrorInfo,
    InvalidArguments,
    JobError,
    JobFailed,
    JobNotFound,
    JobRecord,
    JobStatus,
    ResultsDisabled,
    Timeout,
)
from runnel.jobs.result import JobResult, SyncJobResult

__all__ = [
    "AsyncJob",
    "Clock",
    "ErrorInfo",
    "InvalidArguments",
    "JobContext",
    "JobError",
    "JobFailed",
    "JobFunction",
    "JobNotFound",
    "JobRecord",
    "JobResult",
    "JobStatus",
    "ManualClock",
    "ResultsDisabled",
    "SyncJob",
    "SyncJobResult",
    "SystemClock",
    "Timeout",
    "current_job",
]
