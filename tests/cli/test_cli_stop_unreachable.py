"""The first SIGINT/SIGTERM stops `runnel worker` cleanly whatever start-up step waits on an
unreachable Redis: a closed port, or a black-holed one that never answers.

Redis goes away at a chosen step (a :class:`~tests.support.gate.Gate` in front of it cuts it off
at that step's first command): loading schemas, joining the processor's membership,
preparing the job queue, registering the job executor, the leader election, a metrics
sample, and two worker processes under the supervisor. The worker is signalled while it
waits there and must exit 0, saying why it stopped, with no traceback.

Nothing is in flight at start-up, so a stop has nothing to wait for: the app's grace
period is made longer than any test may take, and commands never time out on the
client side (a black-holed one stays unanswered), so a wait the stop does not interrupt
hangs the test instead of passing late.
"""

from __future__ import annotations

import signal
import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runnel_redis.embedded import Server
from tests.support.gate import Gate, Mode
from tests.support.ports import free_port
from tests.support.processes import WorkerProcess, env_with, wait_for

MODULE = "stopmod"

SOURCE = """
from runnel import App, Record

app = App(name={name!r}, default_serializer="avro", default_grace_period=3600)


class Ping(Record):
    key: str


pings = app.stream("pings", record=Ping, partition_by="key", partition_count=2)


@app.processor(pings)
async def a(events):
    async for _ in events:
        pass


@app.job(name="noop")
async def noop() -> None:
    return None
"""

NEVER = "socket_timeout=3600&socket_connect_timeout=3600"
"""Client options in the URL: a command Redis never answers stays unanswered."""


@dataclass(frozen=True)
class Step:
    flags: tuple[str, ...]
    command: str
    """What the step sends first (a key name, a command): Redis goes away there."""
    failed: str
    """The log says so once the step meets a closed port (--log-level debug)."""
    from_start: int = 0
    """Redis is away from the start: then connections never get past their handshake,
    and this many (one per call waiting, the step's among them) show every call waits."""
    processes: int = 1


STEPS = {
    "schemas": Step(("--no-jobs",), "__schm:", "loading schemas failed"),
    "join": Step(("--no-jobs",), "__memb:", "joining failed"),
    "job-queue": Step(("--no-processors",), "{name}.queue", "preparing the job queue failed"),
    "job-register": Step(
        ("--no-processors",), "{name}.beat.", "registering the job executor failed"
    ),
    "leadership": Step(("--no-processors", "--no-jobs"), "__lead:", "leader election failed"),
    "metrics": Step(
        ("--no-processors", "--metrics-port", "{port}"),
        "ZCOUNT",
        "sampling the job queue failed",
        from_start=3,  # the job queue, the leader election, the sample
    ),
    "supervisor": Step(
        ("--no-processors",),
        "{name}.queue",
        "preparing the job queue failed",
        from_start=4,  # in each process: the job queue, the leader election
        processes=2,
    ),
}

SIGNALS = [signal.SIGINT, signal.SIGTERM]


@pytest.fixture
def gates() -> Iterator[list[Gate]]:
    made: list[Gate] = []
    yield made
    for gate in made:
        gate.close()


@pytest.mark.parametrize("sig", SIGNALS, ids=[s.name for s in SIGNALS])
@pytest.mark.parametrize("mode", ["closed", "hole"])
@pytest.mark.parametrize("step", STEPS.values(), ids=STEPS.keys())
def test_first_signal_stops_a_worker_waiting_on_redis(
    tmp_path: Path,
    app_name: str,
    redis_server: Server,
    redis_url: str,
    gates: list[Gate],
    step: Step,
    mode: Mode,
    sig: signal.Signals,
) -> None:
    (tmp_path / f"{MODULE}.py").write_text(textwrap.dedent(SOURCE.format(name=app_name)))
    command = step.command.format(name=app_name).encode()
    gate = Gate(redis_server.port, b"" if step.from_start else command, mode)
    gates.append(gate)
    flags = [f.format(port=free_port()) for f in step.flags]
    if step.processes > 1:
        flags += ["--processes", str(step.processes)]
    env = env_with(gate.url(NEVER))
    with WorkerProcess(f"{MODULE}:app", tmp_path, env, *flags, "--log-level", "debug") as worker:
        if mode == "hole" and step.from_start:
            wait_for(lambda: gate.received(b"") >= step.from_start, 60)
        elif mode == "hole":
            # The step's command has reached Redis, which will never answer it.
            wait_for(lambda: gate.received(command), 60)
        else:
            # Each process has said Redis is away, and the step has met it.
            wait_for(lambda: worker.output.count("retrying quietly") >= step.processes, 60)
            wait_for(lambda: step.failed in worker.output, 60)
        assert gate.cut.is_set()
        worker.signal(sig)
        try:
            code = worker.proc.wait(120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the worker did not stop on {sig.name}:\n{worker.output}")
    out = worker.output
    assert code == 0, out
    assert "Traceback" not in out, out
    assert "cancelling everything now" not in out, out  # one signal was enough
    assert "signalled again" not in out, out
    if step.processes > 1:
        assert "stopping 2 worker processes" in out, out
        assert out.count("worker stopping: received SIGTERM") == 2, out
        assert out.count(") exited with code 0") == 2, out
    else:
        assert f"worker stopping: received {sig.name}" in out, out
    assert out.count("worker stopped") == step.processes, out
