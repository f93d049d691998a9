"""The exit codes the docs give are the ones the command line uses: the table of
docs/cli.md against the code's constants, and every sentence of the docs that gives the
exit code for refused credentials (3 for ``runnel worker``, 1 for the other commands,
which report every error alike)."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from runnel.cli.worker import Refused
from runnel.runtime.supervisor import REFUSED

ROOT = Path(__file__).parents[2]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


def exit_code_table() -> dict[int, str]:
    """``{code: "when"}`` from the table under "## Errors and exit codes" in docs/cli.md."""
    text = (ROOT / "docs" / "cli.md").read_text()
    section = text.split("## Errors and exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M)
    return {int(code): when for code, when in rows}


def test_the_table_lists_the_codes_the_command_line_uses() -> None:
    table = exit_code_table()
    assert set(table) == {0, click.ClickException.exit_code, click.UsageError.exit_code, REFUSED}
    assert "Error: " in table[click.ClickException.exit_code]
    assert "command line itself is wrong" in table[click.UsageError.exit_code]
    assert "refused its credentials" in table[REFUSED]
    assert Refused.exit_code == REFUSED


def sentences(path: Path) -> list[str]:
    """The text's sentences, each on one line (a table row's cells count as text too)."""
    text = re.sub(r"\s+", " ", path.read_text())
    return re.split(r"(?<=[.!?])\s+", text)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_refused_credentials_are_given_exit_code_3_everywhere(path: Path) -> None:
    """A sentence on refused credentials gives 3, or 1 for the other commands, saying
    so by naming `runnel worker` as the one that exits 3."""
    wrong = [
        sentence
        for sentence in sentences(path)
        if re.search(r"credentials|\bACL\b", sentence)
        for code in re.findall(r"exit(?:s| code| status) (\d+)", sentence)
        if int(code) != REFUSED
        and not (int(code) == click.ClickException.exit_code and "worker` exits 3" in sentence)
    ]
    assert not wrong, wrong
