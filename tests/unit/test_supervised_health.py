"""What the supervisor of ``--processes`` answers for its children's slots
(runnel.runtime.supervised_health), from real child processes and their files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from runnel.runtime.supervised_health import SupervisedHealth
from runnel.runtime.supervisor import Supervisor

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_a_child_that_exited_fails_liveness_unless_stopping(tmp_path: Path) -> None:
    supervisor = Supervisor(SLEEP, 1)
    health = SupervisedHealth(supervisor, str(tmp_path), liveness_timeout=30)
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    slot = supervisor.slots[0]
    slot.process = done
    verdict = health.live()
    assert not verdict.ok
    assert verdict.reasons == ["process 1: exited; waiting to restart it"]
    supervisor._signals = 1  # told to stop: children exit as asked
    assert health.live().ok
    assert health.ready().reasons == ["stopping"]


def test_readiness_is_what_each_child_wrote(tmp_path: Path) -> None:
    supervisor = Supervisor(SLEEP, 1)
    health = SupervisedHealth(supervisor, str(tmp_path), liveness_timeout=30)
    child = subprocess.Popen(SLEEP)
    try:
        slot = supervisor.slots[0]
        slot.process = child
        slot.started = time.monotonic()
        assert health.live().ok  # not written yet, within its time to start
        assert health.ready().reasons == [f"process 1 (pid {child.pid}): starting"]
        said = {"ready": False, "reasons": ["jobs: registering"]}
        (tmp_path / f"{child.pid}.json").write_text(json.dumps(said))
        assert health.ready().reasons == [f"process 1 (pid {child.pid}): jobs: registering"]
        (tmp_path / f"{child.pid}.json").write_text(json.dumps({"ready": True, "reasons": []}))
        assert health.ready().ok
        old = time.time() - 60
        os.utime(tmp_path / f"{child.pid}.json", (old, old))  # its loop stopped writing
        [reason] = health.live().reasons
        assert reason.startswith(f"process 1 (pid {child.pid}): its event loop has not run for")
        assert not health.ready().ok
        health.forget(child.pid)
        assert not (tmp_path / f"{child.pid}.json").exists()
    finally:
        child.kill()
        child.wait()
