"""Reading the docs' code blocks: the pages, their fenced blocks of one language, and the
file name a Python block is headed by (``# shop/app.py``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
FILE_HEADER = re.compile(r"^# ([\w/]+\.py)\b")
"""A block's first line naming the file it is: ``# shop/app.py`` (a comment may follow)."""


def fenced(text: str, lang: str) -> list[tuple[int, str]]:
    """Each ```` ```lang ```` block of ``text``: the line its code starts on, and the code."""
    return [
        (text.count("\n", 0, m.start()) + 2, m.group(1))
        for m in re.finditer(rf"^```{lang}\n(.*?)^```$", text, re.M | re.S)
    ]


def readme_section(title: str) -> str:
    """The README's ``## title`` section, up to the next one."""
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end]
