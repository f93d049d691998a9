"""Every Markdown table of the repository renders whole: a blank line inside one ends the
table, and the rows after it then show as a paragraph of pipes (the guide's "Moving from
runnel 0.1" table did). So a table starts with a header row and its separator, and all its
rows have as many cells as its header."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SEPARATOR = re.compile(r"^\|?(\s*:?-+:?\s*\|)+\s*(:?-+:?\s*)?$")


def markdown_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in listed] or sorted(ROOT.glob("**/*.md"))


def cell_count(row: str) -> int:
    """Cells of a row; ``\\|`` is a pipe inside a cell (GitHub splits at every other one,
    code spans too)."""
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return len(re.split(r"(?<!\\)\|", row))


@dataclass
class Table:
    line: int  # 1-based, of its first row
    rows: list[str] = field(default_factory=list)


def tables(text: str) -> list[Table]:
    """The runs of lines starting with ``|``, outside fenced code blocks."""
    found: list[Table] = []
    current: Table | None = None
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("|"):
            if current is None:
                current = Table(number)
                found.append(current)
            current.rows.append(line)
        else:
            current = None
    return found


def problems(text: str) -> list[str]:
    found = []
    for table in tables(text):
        if len(table.rows) < 2 or not SEPARATOR.match(table.rows[1]):
            found.append(f"line {table.line}: rows with no header row and separator above them")
            continue
        width = cell_count(table.rows[0])
        for offset, row in enumerate(table.rows):
            if cell_count(row) != width:
                found.append(f"line {table.line + offset}: {cell_count(row)} cells, not {width}")
    return found


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_table_is_whole(path: Path) -> None:
    assert not problems(path.read_text())


def test_the_check_sees_a_table_cut_by_a_blank_line_and_a_short_row() -> None:
    cut = "| a | b |\n| --- | --- |\n| 1 | 2 |\n\n| 3 | 4 |\n"
    assert problems(cut) == ["line 5: rows with no header row and separator above them"]
    short = "| a | b |\n| --- | --- |\n| 1 |\n| `x \\| y` | 2 |\n"
    assert problems(short) == ["line 3: 1 cells, not 2"]
    assert not problems("| a | b |\n|---|:-:|\n| 1 | 2 |\n\n```\n| not | a table\n```\n")
