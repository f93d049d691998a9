"""The public API is typed for a user's program (every package ships ``py.typed``):
``mypy --strict`` over a user's app (tests/support/typed_app/user_app.py: records, streams,
sends, processors, a table, jobs with ``delay()`` and ``JobResult.get()``, workflows,
``runnel.testing``) finds nothing, and over one with mistakes
(tests/support/typed_app/user_mistakes.py) finds exactly the errors its lines are marked
with: arguments of ``delay()`` checked against the job's function, the type of
``JobResult.get()``, a record of the wrong type sent to a ``Stream[Order]``, a processor of
another stream's records, a wrong field of a record.

mypy runs as a user's would: from a directory outside the checkout (none of its
configuration), on the packages installed in this environment."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).parents[1] / "support" / "typed_app"
MARK = re.compile(r"#\s*E:\s*([a-z-]+)\s*$")
ERROR = re.compile(r"^(?P<file>[\w.]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[tuple[int, str]]]:
    """One ``mypy --strict`` run over both programs: each file's (line, code) errors."""
    where = tmp_path_factory.mktemp("typed_app")
    for program in PROGRAMS.glob("*.py"):
        shutil.copy(program, where / program.name)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(where / ".mypy_cache"),
            "--no-error-summary",
            "--hide-error-context",
            "user_app.py",
            "user_mistakes.py",
        ],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stderr
    found: dict[str, set[tuple[int, str]]] = {"user_app.py": set(), "user_mistakes.py": set()}
    for line in done.stdout.splitlines():
        if " note: " in line:
            continue
        match = ERROR.match(line)
        assert match is not None, line
        found[match["file"]].add((int(match["line"]), match["code"]))
    return found


def test_a_users_app_type_checks_clean(mypy_errors: dict[str, set[tuple[int, str]]]) -> None:
    assert mypy_errors["user_app.py"] == set()


def test_a_users_mistakes_are_each_found(mypy_errors: dict[str, set[tuple[int, str]]]) -> None:
    lines = (PROGRAMS / "user_mistakes.py").read_text().splitlines()
    expected = {(n, m[1]) for n, line in enumerate(lines, 1) if (m := MARK.search(line))}
    assert len(expected) == 9
    assert mypy_errors["user_mistakes.py"] == expected
