"""The small pieces of messages: counts agree with their nouns everywhere."""

from __future__ import annotations

import re
from pathlib import Path

from runnel.text import plural, runs

SOURCES = Path(__file__).parents[2] / "packages"


def test_plural_agrees_with_the_count() -> None:
    assert plural(1, "dead letter") == "1 dead letter"
    assert plural(0, "dead letter") == "0 dead letters"
    assert plural(2, "event") == "2 events"
    assert plural(1, "entry", "entries") == "1 entry"
    assert plural(3, "entry", "entries") == "3 entries"


def test_runs_are_unchanged() -> None:
    assert runs([0, 1, 2, 5, 7, 8, 9]) == "0-2, 5, 7-9"


def test_no_message_puts_a_count_before_a_fixed_plural() -> None:
    """``f"{n} dead letters"`` reads "1 dead letters" when n is 1: use plural()."""
    nouns = "dead letters|dead jobs|events|partitions|job outcomes"
    pattern = re.compile(r"\{(?:len\([^)]*\)|count|sent|n)\} (?:" + nouns + r")\b")
    found = [
        f"{path.relative_to(SOURCES)}:{number}"
        for path in sorted(SOURCES.glob("*/src/**/*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, found
