"""The Redis key names Runnel uses: part of the public contract (docs/architecture.md)."""

from __future__ import annotations

from runnel.jobs.queues import DEFAULT_QUEUE


def partition(app: str, stream: str, number: int) -> str:
    return f"__strm:{app}.{stream}.{number}"


def lost(app: str, stream: str, number: int) -> str:
    """A hash of the partition's entries trimmed before a group read them, per group
    (only streams with on_full="drop_oldest" write it; not a runnel 0.1 key)."""
    return f"__lost:{app}.{stream}.{number}"


def identities(app: str, stream: str, number: int) -> str:
    """A hash of the partition's identity state: its current generation of keys and when
    it began, its count of duplicates dropped (not a runnel 0.1 key)."""
    return f"__idem:{app}.{stream}.{number}"


def identity_keys(app: str, stream: str, number: int, generation: int) -> str:
    """One of the partition's two generations of remembered call identities and keys (a
    hash, expiring; not a runnel 0.1 key)."""
    return f"__idem:{app}.{stream}.{number}.k{generation}"


def producers(app: str, stream: str, number: int) -> str:
    """The partition's sequenced producers: producer -> its state (a hash, expiring)."""
    return f"__idem:{app}.{stream}.{number}.seq"


def table(app: str, table: str, number: int) -> str:
    """A table's state on partition ``number`` of its source stream: a hash of encoded
    keys to encoded values (not a runnel 0.1 key)."""
    return f"__tabl:{app}.{table}.{number}"


def deadlines(app: str, table: str, number: int) -> str:
    """When each key of a table's partition next needs its owner (windows closing or
    expiring): a sorted set of encoded keys scored by event time."""
    return f"__tdue:{app}.{table}.{number}"


def table_counts(app: str) -> str:
    """The partition count each table of the app was built with (a hash: table -> count)."""
    return f"__tbls:{app}"


def membership(app: str, stream: str, processor: str) -> str:
    return f"__memb:{app}.{stream}.{processor}"


def control(app: str, stream: str, processor: str) -> str:
    return f"__ctrl:{app}.{stream}.{processor}"


def partition_lock(app: str, stream: str, processor: str, number: int) -> str:
    return f"__lock:{app}.{stream}.{processor}.{number}"


def admin_lock(app: str, stream: str, processor: str) -> str:
    return f"__lock:{app}.{stream}.{processor}.admin"


def heartbeat(app: str, stream: str, processor: str, executor_id: str) -> str:
    return f"__beat:{app}.{stream}.{processor}.{executor_id}"


def quarantine(app: str, stream: str, processor: str) -> str:
    """A hash: partition number -> JSON {"id", "error", "since"} of each quarantined one."""
    return f"__quar:{app}.{stream}.{processor}"


def leader(app: str) -> str:
    return f"__lead:{app}"


def schemas(app: str, stream: str) -> str:
    return f"__schm:{app}.{stream}"


# The job queue: every key of an app's queue starts with __jobs:{app}. (docs/jobs.md).


def jobs_prefix(app: str) -> str:
    return f"__jobs:{app}."


def job_queue(app: str, queue: str = DEFAULT_QUEUE) -> str:
    """The stream of a queue: the default queue's is the one of runnel before queues."""
    return f"__jobs:{app}.queue" + queue_suffix(queue)


def job_schedule(app: str, queue: str = DEFAULT_QUEUE) -> str:
    return f"__jobs:{app}.schedule" + queue_suffix(queue)


def job_dead(app: str, queue: str = DEFAULT_QUEUE) -> str:
    return f"__jobs:{app}.dead" + queue_suffix(queue)


def job_queues(app: str) -> str:
    """The set of the named queues (all but the default one) that ever held a job."""
    return f"__jobs:{app}.queues"


def queue_suffix(queue: str) -> str:
    """What a queue's keys add to the default queue's: nothing for the default queue,
    else ``.{queue}`` (the job scripts build the same names from the prefix)."""
    return "" if queue == DEFAULT_QUEUE else "." + queue


def job_results_index(app: str) -> str:
    return f"__jobs:{app}.results"


def job_executors(app: str) -> str:
    return f"__jobs:{app}.executors"


def job(app: str, job_id: str) -> str:
    return f"__jobs:{app}.job.{job_id}"


def job_result(app: str, job_id: str) -> str:
    return f"__jobs:{app}.result.{job_id}"


def job_beat(app: str, executor: str) -> str:
    return f"__jobs:{app}.beat.{executor}"


JOB_GROUP = "workers"
"""The consumer group job executors read the queue as (each under its own consumer name)."""
