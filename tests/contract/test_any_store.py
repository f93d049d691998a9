"""The suite run as a store author runs it (docs/plugins.md, "Testing a store"): against
a store of a plugin that is not installed, named by ``--store-url``, loaded by
``--store-plugin``. The store here is ``memory://`` under a scheme of its own, without
its optional administration: those tests are skipped, saying why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

PLUGIN = """
from runnel.memory.backend import MemoryBackend
from runnel.plugins import hookimpl


class Bare(MemoryBackend):
    def admin(self):
        return None


@hookimpl
def runnel_transports(register):
    register("bare", lambda url, settings: Bare.from_url(url))
"""


def test_the_suite_runs_against_a_store_named_by_url(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    if pytestconfig.getoption("store_url"):
        pytest.skip("a check of the suite itself, not of the store given by --store-url")
    (tmp_path / "bare_store.py").write_text(PLUGIN)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    run = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-v"),
            *("tests/contract/test_admin.py", "tests/contract/test_schemas.py"),
            *("--store-url", "bare://contract", "--store-plugin", "bare_store"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "test_schema_store_adds_once_and_checks_under_the_lock[bare] PASSED" in out
    assert "test_scan_remove_and_unfenced_ack[bare] SKIPPED" in out
    assert "optional part not offered: Bare.admin() is None" in out
    assert "[memory]" not in out and "[redis]" not in out
