"""The master holding an app's job queue killed (SIGKILL) while real worker processes run
its jobs and a producer enqueues with ``wait_replicas=1``: its replica takes over, and
every job whose enqueue returned is run (at least once) to SUCCESS.

The whole queue of an app carries the app's hash tag, so it is in one slot, on one
master: that master is the one killed. The workers are those of
tests/jobs/test_jobs_processes.py (``jobsapp``), the producer an App of the same
name in the test process, declaring the same ``quick`` job with ``wait_replicas=1``.

What a user does about an enqueue that raises, and what the producer here does: an
enqueue that raises :class:`~runnel.exceptions.NotReplicated` is in Redis but not known
to be on a replica (while the promoted replica has no replica of its own, every enqueue
raises it), and one that meets a transport error (the master gone, the cluster still
electing) may or may not be stored. Neither is known to be sent, so the producer notes
the error and enqueues again with the same ``job_id``: ``delay(job_id=...)`` stores a
job once, so the retry adds it if it was lost and changes nothing if it was not.
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from redis.exceptions import RedisError

from runnel import App
from runnel.exceptions import NotReplicated, RunnelError
from runnel_redis.layout import Cluster
from tests.jobs.test_jobs_processes import (  # noqa: F401
    CONCURRENCY,
    HANG,
    Jobs,
    executor_pid,
    jobs,
)
from tests.support.processes import wait_for
from tests.support.redis_cluster import RedisClusterProcesses

RECORDS = "runs"
"""The list where the jobs of ``jobsapp`` record each try (a key without a tag)."""


@pytest.fixture
def redis_url(redis_cluster_replicas: RedisClusterProcesses) -> str:
    return redis_cluster_replicas.url


@pytest.fixture
def app_name(redis_cluster_replicas: RedisClusterProcesses) -> str:
    """An app whose job queue is on another master than the list the jobs record their
    tries in, so the kill loses nothing of what the test reads to check the runs."""
    records = redis_cluster_replicas.master_of(RECORDS).port
    while True:
        name = f"t{uuid.uuid4().hex[:10]}"
        if redis_cluster_replicas.master_of(Cluster().job_queue(name)).port != records:
            return name


def not_replicated(error: str) -> bool:
    return error.startswith(NotReplicated.__name__ + ":")


class Producer:
    """Enqueues ``quick`` jobs one after another, in a thread with its own event loop,
    until told to stop. An enqueue that raises is noted and tried again, same job id,
    until it returns: ``acked`` lists the ids whose enqueue returned."""

    def __init__(self, workers_app: Jobs) -> None:
        self.app = App(
            workers_app.app_name, redis_url=workers_app.redis_url, wait_replicas=1, wait_timeout=1
        )
        self.quick = self.app.job(retries=3, name="quick")(workers_app.module.quick.func)
        self.acked: list[str] = []
        self.raised: list[tuple[str, str]] = []
        """(job id, error) of every enqueue that raised."""
        self.stopping = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="producer")

    def __enter__(self) -> Producer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop after the job being enqueued (retried until it is stored)."""
        self.stopping.set()
        self.thread.join(HANG)
        assert not self.thread.is_alive(), "the producer did not stop"
        if self.failure is not None:
            raise self.failure

    def _main(self) -> None:
        try:
            asyncio.run(self._produce())
        except BaseException as error:  # shown by stop(), in the test's thread
            self.failure = error

    async def _produce(self) -> None:
        try:
            n = 0
            while not self.stopping.is_set():
                await self._enqueue(f"p{n}", n)
                n += 1
                await asyncio.sleep(0.01)
        finally:
            await self.app.aclose()

    async def _enqueue(self, job_id: str, n: int) -> None:
        for _ in range(int(HANG / 0.05)):
            try:
                await self.quick.delay(n, 0.05, job_id=job_id)
            except (NotReplicated, RunnelError, RedisError, OSError) as error:
                self.raised.append((job_id, f"{type(error).__name__}: {error}"))
                await asyncio.sleep(0.05)
                continue
            self.acked.append(job_id)
            return
        raise AssertionError(f"{job_id} could not be enqueued: {self.raised[-3:]}")


def test_the_job_queue_master_killed_mid_run_loses_no_enqueued_job(
    jobs: Jobs,  # noqa: F811 (the fixture imported above)
    redis_cluster_replicas: RedisClusterProcesses,
) -> None:
    cluster = redis_cluster_replicas
    workers = [jobs.start(), jobs.start()]
    jobs.wait_ready(*workers)
    assert cluster.master_of(jobs.queue).port != cluster.master_of(RECORDS).port

    with Producer(jobs) as producer:
        wait_for(lambda: len(jobs.runs()) >= 40 and len(producer.acked) >= 40, HANG)
        killed = cluster.kill_master_of(jobs.queue)  # returns once the replica took over
        # The promoted replica has no replica of its own until the killed node is back as
        # one: meanwhile every enqueue raises NotReplicated, and is retried.
        wait_for(lambda: any(not_replicated(error) for _, error in producer.raised), HANG)
        cluster.revive(killed)
        after = len(producer.acked)
        wait_for(lambda: len(producer.acked) >= after + 40, HANG)
        producer.stop()
    # Each enqueue that raised was retried, same id, until one returned.
    assert {job_id for job_id, _ in producer.raised} <= set(producer.acked)

    # Every job whose enqueue returned ends SUCCESS, from its last try, by the worker
    # that ran it; the queue and the schedule end empty, nothing dead.
    records = jobs.check_succeeded(producer.acked)
    assert all(jobs.started(i) for i in records)

    # The workers carried on: neither died, and both run new jobs.
    for w in workers:
        assert w.proc.poll() is None, w.output
    more = jobs.quick("more", 4 * CONCURRENCY, pause=0.1)
    records = jobs.check_succeeded(more)
    assert {executor_pid(r.executor) for r in records.values()} == {w.proc.pid for w in workers}, (
        "a worker stopped taking jobs"
    )
    for w in workers:
        assert w.stop() == 0, w.output
