"""Prometheus metrics of a worker (docs/operations.md): ``runnel worker --metrics-port``.
Internal: the metrics' names and meanings are the interface, not these modules.

:mod:`.stats` holds the plain counters the processing and job code adds to;
:mod:`.runtime` flushes them into prometheus_client and samples lag and queue counts;
:mod:`.server` serves ``/metrics``, for one worker or for a supervisor's children.
"""
