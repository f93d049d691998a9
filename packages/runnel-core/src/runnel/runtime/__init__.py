"""Running a process (internal: plugins use only :mod:`runnel.runtime.retry`).

worker.py      the Worker: one process's executors, job executor, background tasks,
               leadership, signals and exit code
supervisor.py  ``runnel worker --processes N``: starts, restarts and stops the workers
retry.py       what every loop uses: retrying the store with backoff, cancellation that
               is never lost, racing a wait against a stop
health.py      what /healthz and /readyz answer: the loop's tick, the store checks
probes.py      serving them over HTTP, alone or beside /metrics
supervised_health.py  the supervisor's answer for its children
"""
