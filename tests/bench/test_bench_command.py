"""``python -m benchmarks`` refuses ``--processes`` where it means nothing, with one
error line and no traceback (before any redis-server is started)."""

from __future__ import annotations

import subprocess
import sys

from benchmarks.common import ROOT


def test_processes_only_with_jobs_or_processes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "scaling", "--processes", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "error: --processes goes with jobs or processes" in done.stderr
    assert "Traceback" not in done.stderr


def test_processes_must_be_two_or_more() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "jobs", "--processes", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "error: --processes must be 2 or more" in done.stderr


def test_every_benchmark_name_chooses_its_own_run_and_baseline() -> None:
    """Each name of the in-server benchmarks picks itself (a name of OTHERS was once
    looked up in SUITE: `bench state` and `bench jobs` ended in a KeyError)."""
    from benchmarks.__main__ import OTHERS, SUITE, choose

    for name, (run, baseline) in OTHERS.items():
        assert choose(name, None) == ({name: run}, baseline)
    for name, run in SUITE.items():
        assert choose(name, None) == ({name: run}, "plain redis-py")
    assert choose(None, None) == (SUITE, "plain redis-py")
    assert list(choose("jobs", 2)[0]) == ["processes"]


def test_a_case_only_where_the_benchmark_has_it() -> None:
    """``memory identities`` runs the identity state alone; a case another benchmark has
    no use for is refused in one line, not ignored (before any redis-server starts)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "state", "identities"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "error: no case 'identities' of state" in done.stderr
    assert "Traceback" not in done.stderr
