"""The Prometheus metrics a worker exports (docs/operations.md has the table).

Each worker builds its own set in a registry of its own, so several workers in one
process (tests) do not share counters. In multiprocess mode (``runnel worker
--processes N``) every value is written to the supervisor's directory as well; gauges
say how the children's values combine.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from runnel.metrics.stats import EVENT_BUCKETS, JOB_BUCKETS, SAMPLE_INTERVAL

PARTITION = ("app", "processor", "stream", "partition")
PROCESSOR = ("app", "processor", "stream")
JOB = ("app", "job", "queue")
QUEUE = ("app", "queue")
TABLE = ("app", "processor", "stream", "table")
APP = ("app",)
STREAM = ("app", "stream")


class Definitions:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.processed = Counter(
            "runnel_events_processed_total",
            "Events whose processor iteration finished (acknowledged soon after).",
            PARTITION,
            registry=r,
        )
        self.failed = Counter(
            "runnel_events_failed_total",
            "Processor iterations that raised (an event, or a batch under take()).",
            PARTITION,
            registry=r,
        )
        self.redelivered = Counter(
            "runnel_events_redelivered_total",
            "Events delivered again: read before, never acknowledged.",
            PARTITION,
            registry=r,
        )
        self.acked = Counter(
            "runnel_acks_sent_total",
            "Events acknowledged to the store.",
            PARTITION,
            registry=r,
        )
        self.processing = Histogram(
            "runnel_event_processing_seconds",
            "Time of a processor iteration (one event, or a batch under take()), sampled.",
            PROCESSOR,
            buckets=EVENT_BUCKETS,
            registry=r,
        )
        self.rebalances = Counter(
            "runnel_rebalances_total",
            "Rebalances this worker's executors went through.",
            PROCESSOR,
            registry=r,
        )
        self.owned = Gauge(
            "runnel_partitions_owned",
            "Partitions this worker owns now.",
            PROCESSOR,
            multiprocess_mode="livesum",
            registry=r,
        )
        self.lag = Gauge(
            "runnel_partition_lag",
            "Events of an owned partition not yet delivered to the processor.",
            PARTITION,
            multiprocess_mode="livemostrecent",
            registry=r,
        )
        self.pending = Gauge(
            "runnel_partition_pending",
            "Events of an owned partition delivered but not acknowledged.",
            PARTITION,
            multiprocess_mode="livemostrecent",
            registry=r,
        )
        self.lost = Gauge(
            "runnel_partition_lost",
            "Events of an owned partition trimmed before the processor read them, since the "
            "stream began (on_full='drop_oldest'); never decreases.",
            PARTITION,
            multiprocess_mode="livemostrecent",
            registry=r,
        )
        self.quarantined = Gauge(
            "runnel_partition_quarantined",
            "1 while an owned partition is quarantined (stopped on a failing event), else 0.",
            PARTITION,
            multiprocess_mode="livemostrecent",
            registry=r,
        )
        self.table_commits = Counter(
            "runnel_table_commits_total",
            "Commits that wrote the table (its changes with the acknowledgements).",
            TABLE,
            registry=r,
        )
        self.table_hits = Counter(
            "runnel_table_cache_hits_total",
            "Reads of the table served by the worker's cache.",
            TABLE,
            registry=r,
        )
        self.table_misses = Counter(
            "runnel_table_cache_misses_total",
            "Keys of the table read from the store (not cached).",
            TABLE,
            registry=r,
        )
        self.table_late = Counter(
            "runnel_table_late_events_total",
            "Events too late for every window of a windowed table they would be in.",
            TABLE,
            registry=r,
        )
        self.table_closed = Counter(
            "runnel_table_windows_closed_total",
            "Windows of a windowed table closed (and emitted, where it says).",
            TABLE,
            registry=r,
        )
        self.table_watermark = Gauge(
            "runnel_table_watermark_seconds",
            "The latest event time an owned partition of a windowed table has seen (committed).",
            ("app", "table", "partition"),
            multiprocess_mode="livemostrecent",
            registry=r,
        )
        self.table_keys = Gauge(
            "runnel_table_keys",
            "Keys an owned partition of the table holds (committed).",
            ("app", "table", "partition"),
            multiprocess_mode="livemostrecent",
            registry=r,
        )
        self.leader = Gauge(
            "runnel_leader",
            "1 while this worker is the app's elected leader.",
            APP,
            multiprocess_mode="livemax",
            registry=r,
        )
        self.duplicates = Counter(
            "runnel_duplicates_dropped_total",
            "Records this worker's own code sent that their partitions had already (by their"
            " identity: a send's call retried, a record's key), so were not appended again.",
            STREAM,
            registry=r,
        )
        self.enqueued = Counter(
            "runnel_jobs_enqueued_total",
            "Jobs enqueued by this worker's own code (delay()).",
            JOB,
            registry=r,
        )
        self.ticks = Counter(
            "runnel_jobs_ticks_total",
            "Ticks of periodic jobs this worker settled: on_time and caught_up enqueued a job,"
            " skipped did not.",
            (*JOB, "how"),
            registry=r,
        )
        self.started = Counter("runnel_jobs_started_total", "Job tries started.", JOB, registry=r)
        self.succeeded = Counter(
            "runnel_jobs_succeeded_total", "Job tries that succeeded.", JOB, registry=r
        )
        self.retried = Counter(
            "runnel_jobs_retried_total",
            "Job tries that failed and will be retried.",
            JOB,
            registry=r,
        )
        self.dead = Counter(
            "runnel_jobs_dead_total",
            "Jobs that failed for good (dead letters).",
            JOB,
            registry=r,
        )
        self.cancelled = Counter(
            "runnel_jobs_cancelled_total",
            "Jobs this worker had taken that were cancelled (stopped, or never started).",
            JOB,
            registry=r,
        )
        self.limited = Counter(
            "runnel_jobs_limited_total",
            "Starts this worker put off (back to the schedule, uncounted) by the job's"
            " rate_limit (limit=rate) or concurrency_limit (limit=concurrency).",
            (*JOB, "limit"),
            registry=r,
        )
        self.run_time = Histogram(
            "runnel_job_run_seconds",
            "Run time of a job try.",
            JOB,
            buckets=JOB_BUCKETS,
            registry=r,
        )
        self.queued = self._queue_gauge("runnel_jobs_queued", "Jobs waiting in the queue.")
        self.scheduled = self._queue_gauge(
            "runnel_jobs_scheduled", "Jobs waiting for a later time (countdown, eta, retry)."
        )
        self.executing = self._queue_gauge("runnel_jobs_executing", "Jobs taken by workers.")
        self.dead_letters = self._queue_gauge("runnel_jobs_dead_letters", "Dead letters kept.")
        # Per app, not per queue: the records are kept as results are, in one index.
        self.cancelled_kept = self._queue_gauge(
            "runnel_jobs_cancelled_kept",
            "Cancelled jobs kept (for results_ttl after the cancel).",
            APP,
        )

    def _queue_gauge(self, name: str, doc: str, labels: tuple[str, ...] = QUEUE) -> Gauge:
        return Gauge(
            name,
            f"{doc} Sampled every {SAMPLE_INTERVAL:g} s by each worker running the job queue.",
            labels,
            multiprocess_mode="livemostrecent",
            registry=self.registry,
        )
