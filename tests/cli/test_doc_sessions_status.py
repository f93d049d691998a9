"""docs/cli.md's ``runnel status`` session of two workers running the example app: two
real ``runnel worker`` processes on examples/orders.py (4 partitions) and a real
redis-server; what the command prints must be what the page shows, but for what no two
runs share (hosts, pids, ids, and the order the random executor ids sort the executor
lines in). tests/cli/test_doc_sessions.py lists the session as run here.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tests.cli.test_doc_sessions import EVENT, ROOT, normalised, session, steps
from tests.support.processes import WorkerProcess, cli, env_with, wait_for

EXECUTOR = re.compile(r"  executor (\w+)  [\w.-]+ pid (\d+)  (alive|NOT BEATING)  partitions (\S+)")
LEADER = re.compile(r"leader: [\w.-]+:(\d+):[0-9a-f]+")


def holding(partitions: str) -> tuple[int, ...]:
    return tuple(int(p) for p in partitions.split(",")) if partitions != "-" else (1 << 30,)


def shaped(text: str) -> str:
    """The executors named E1, E2, ... by the partitions they are assigned (E1 the lowest),
    their lines in that order, their pids P1, P2, ... the same way (the leader's too), and
    their hosts and the leader's own id as placeholders: what has to match is the set of
    executor lines, each one's partitions, and who owns each partition and leads."""
    found = sorted(EXECUTOR.findall(text), key=lambda e: holding(e[3]))
    labels = {eid: f"E{i}" for i, (eid, *_) in enumerate(found, 1)}
    pids = {pid: f"P{i}" for i, (_, pid, *_) in enumerate(found, 1)}
    lines = iter(
        f"  executor E{i}  HOST pid P{i}  {state}  partitions {partitions}"
        for i, (_, _, state, partitions) in enumerate(found, 1)
    )
    text = EXECUTOR.sub(lambda _: next(lines), text)
    text = LEADER.sub(lambda m: f"leader: HOST:{pids.get(m.group(1), 'PID')}:WORKER", text)
    for eid, label in labels.items():
        text = re.sub(rf"\b{eid}\b", label, text)
    return normalised(text)


def test_the_shape_keeps_what_must_match() -> None:
    [(_, _, shown)] = steps(session(("cli.md", "runnel status", 0)).body)
    first, second = EXECUTOR.findall(shown)
    lines = shown.splitlines(keepends=True)
    a, b = (i for i, line in enumerate(lines) if EXECUTOR.match(line))
    lines[a], lines[b] = lines[b], lines[a]
    reordered = "".join(lines)
    # Another order of the executor lines, or other ids: the same.
    assert shaped(reordered) == shaped(shown)
    assert shaped(reordered.replace(first[0], "0123456789ab")) == shaped(shown)
    # An owner that is not the executor assigned the partition, or another leader: not.
    owner_0 = re.search(rf"^ +0  {first[0]} ", shown, re.M)
    assert owner_0 is not None
    swapped = shown.replace(owner_0.group(0), owner_0.group(0).replace(first[0], second[0]))
    assert shaped(swapped) != shaped(shown)
    assert shaped(shown.replace(f":{first[1]}:", f":{second[1]}:")) != shaped(shown)
    assert shaped(shown.replace("partitions 2,3", "partitions 2")) != shaped(shown)


def assigned(cwd: Path, redis_url: str) -> list[list[int]]:
    done = cli("status", "examples.orders:app", "--json", cwd=cwd, env=env_with(redis_url))
    assert done.returncode == 0, done.stderr
    [totals] = json.loads(done.stdout)["processors"]
    return [e["partitions"] for e in totals["executors"]]


def test_two_workers_of_the_example_app(tmp_path: Path, redis_url: str) -> None:
    """The first worker holds all four partitions and leads before the second starts, so
    that the second takes 2 and 3 over (the assignment is sticky); then a few events, and
    the status once both settled (lag and pending 0)."""
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "orders.py", tmp_path / "examples" / "orders.py")
    env = env_with(redis_url)
    [(_, args, shown)] = steps(session(("cli.md", "runnel status", 0)).body)
    first = WorkerProcess("examples.orders:app", tmp_path, env)
    second = None
    try:
        wait_for(lambda: assigned(tmp_path, redis_url) == [[0, 1, 2, 3]])
        second = WorkerProcess("examples.orders:app", tmp_path, env)
        wait_for(lambda: sorted(assigned(tmp_path, redis_url)) == [[0, 1], [2, 3]])
        for customer in ("ada", "bob", "cy", "dee"):
            event = json.loads(EVENT) | {"customer": customer}
            sent = cli("send", "examples.orders:orders", json.dumps(event), cwd=tmp_path, env=env)
            assert sent.returncode == 0, sent.stderr

        def status() -> str:
            done = cli(*args, cwd=tmp_path, env=env)
            assert done.returncode == 0, done.stderr
            return done.stdout

        wait_for(lambda: shaped(status()) == shaped(shown), timeout=60)
        assert shaped(status()) == shaped(shown)
    finally:
        for worker in (first, second):
            if worker is not None:
                assert worker.stop() == 0, worker.output
