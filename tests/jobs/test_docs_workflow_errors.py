"""jobs.md's example of a workflow's error job (Workflows, Errors) runs as shown, on
memory:// and Redis: the job it declares is accepted, and it is called with the workflow
id, the failed job's id and its error, then its own arguments."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import runnel.testing
from tests.support.docs import FILE_HEADER, ROOT, fenced

JOBS = ROOT / "docs" / "jobs.md"


def page_file(name: str) -> str:
    """The block of jobs.md headed ``# name``."""
    blocks = [s for _, s in fenced(JOBS.read_text(), "python")]
    sources = [s for s in blocks if (header := FILE_HEADER.match(s)) and header.group(1) == name]
    assert len(sources) == 1, name
    return sources[0]


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """jobs.md's shop/app.py and shop/billing.py, importable as ``shop``."""
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    for name in ("shop/app.py", "shop/billing.py"):
        (tmp_path / name).write_text(page_file(name))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for module in [m for m in sys.modules if m == "shop" or m.startswith("shop.")]:
        del sys.modules[module]


async def test_the_error_job_of_the_page_runs_as_shown(
    shop: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from shop import billing

    async with runnel.testing.run(billing.app, store=store_url) as t:
        assert await billing.checkout(41, -5) is None
        await t.join()
        workflow_id, job_id, name, error = capsys.readouterr().out.split(maxsplit=3)
        assert (name, error) == ("charge", "ValueError: cannot charge -5.0\n")
        members = await billing.app.workflow_result(workflow_id).members()
        assert [(m[1], m[2].name) for m in members] == [
            ("charge", "DEAD"),
            ("resize", "CANCELLED"),
            ("report", "SUCCESS"),
        ]
        assert members[0][0] == job_id
        reported = await billing.app.job_result(members[-1][0]).get(timeout=10)
        assert reported == (
            f"#billing: workflow {workflow_id} stopped at job {job_id}: "
            "ValueError: cannot charge -5.0"
        )
        assert await billing.checkout(42, 5) == "images/42-100.png"
