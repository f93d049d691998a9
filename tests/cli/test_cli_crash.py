"""At least once, in order, across a `kill -9` of the worker in mid-stream."""

from __future__ import annotations

from tests.support.cli_app import MODULE, Project, by_key, expected_by_key, jsonl, pings
from tests.support.processes import WorkerProcess, wait_for

TOTAL = 3000
KEYS = 9


def first_occurrences(ns: list[int]) -> list[int]:
    seen: set[int] = set()
    out = []
    for n in ns:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def test_kill_9_redelivers_unacknowledged_events_in_order(project: Project) -> None:
    events = pings(TOTAL, keys=KEYS)
    (project.dir / "events.jsonl").write_text(jsonl(events))
    done = project.run("sendmany", f"{MODULE}:pings", "events.jsonl")
    assert done.returncode == 0, done.stderr
    assert project.stream_length() == TOTAL

    env = project.env_with(TEST_DELAY="0.005")
    with WorkerProcess(f"{MODULE}:app", project.dir, env, "--processors", "a") as first:
        wait_for(lambda: len(project.seen("a")) >= TOTAL // 5)
        first.kill()  # SIGKILL: no clean-up, no acknowledgement flush
        assert first.proc.returncode == -9
    before = project.seen("a")
    assert len(before) < TOTAL, "the first worker finished before it was killed"
    # Unacknowledged work is left behind for the next worker.
    assert project.pending("a") > 0

    with WorkerProcess(f"{MODULE}:app", project.dir, env, "--processors", "a") as second:
        wait_for(lambda: set(project.seen("a")) >= {f"{e['key']}:{e['n']}" for e in events}, 120)
        assert second.stop() == 0, second.output

    seen = project.seen("a")
    assert seen[: len(before)] == before
    want = expected_by_key(events)
    got = by_key(seen)
    assert set(got) == set(want)
    for key in want:
        assert first_occurrences(got[key]) == want[key], key
    assert project.pending("a") == 0


def test_worker_killed_before_any_ack_loses_nothing(project: Project) -> None:
    """Killed right after it first processed something: all is redelivered from the start."""
    events = pings(400, keys=4)
    assert project.run("sendmany", f"{MODULE}:pings", "-", input=jsonl(events)).returncode == 0

    env = project.env_with(TEST_DELAY="0.005")
    with WorkerProcess(f"{MODULE}:app", project.dir, env, "--processors", "a") as first:
        wait_for(lambda: len(project.seen("a")) >= 1, interval=0.005)
        first.kill()
    with WorkerProcess(f"{MODULE}:app", project.dir, env, "--processors", "a") as second:
        wait_for(lambda: len(set(project.seen("a"))) >= 400, 60)
        assert second.stop() == 0, second.output

    got = by_key(project.seen("a"))
    want = expected_by_key(events)
    assert {k: first_occurrences(v) for k, v in got.items()} == want
