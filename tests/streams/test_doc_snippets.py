"""The Python examples of the docs that are whole programs or test modules run as written.

Marker convention: an HTML comment on the line right before a ```python block (invisible
on the rendered page) says the block is complete and how to run it:

    <!-- test: run -->     a program: saved in an empty directory and run with python; it
                           must exit 0.
    <!-- test: pytest -->  a test module: saved and run with pytest (pytest-asyncio,
                           asyncio_mode = auto); every test in it must pass.

A block whose first line is a comment naming a file (``# shop/streams.py: ...``,
``# test_shop.py``) is saved under that path, so its imports work as they would in a
project. Blocks that are parts of a larger example carry no marker. Every block that
calls itself a test module (``# test_*.py``) must be marked. The examples run against
``memory://`` or a redis-server they start themselves.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
BLOCK = re.compile(r"^(?:<!-- test: (\w+) -->\n)?```python\n(.*?)^```$", re.M | re.S)
NAMED = re.compile(r"# ([\w/]+\.py)\b")


@dataclass
class Snippet:
    page: Path
    line: int
    how: str | None
    code: str

    @property
    def id(self) -> str:
        return f"{self.page.name}:{self.line}"

    @property
    def path(self) -> str:
        named = NAMED.match(self.code)
        return named.group(1) if named else "snippet.py"


def snippets() -> list[Snippet]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start(2))
            found.append(Snippet(page, line, match.group(1), match.group(2)))
    return found


MARKED = [s for s in snippets() if s.how]


def test_markers_are_known_and_each_is_followed_by_a_python_block() -> None:
    for page in PAGES:
        text = page.read_text()
        markers = re.findall(r"<!-- test: (.*?) -->", text)
        assert set(markers) <= {"run", "pytest"}, (page.name, markers)
        assert len(markers) == sum(1 for s in MARKED if s.page == page), page.name


def test_every_test_module_of_the_docs_is_marked() -> None:
    unmarked = [s.id for s in snippets() if s.path.split("/")[-1].startswith("test_")]
    unmarked = [i for i in unmarked if i not in {s.id for s in MARKED}]
    assert not unmarked, unmarked


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("RUNNEL_")}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("snippet", MARKED, ids=lambda s: s.id)
def test_the_example_runs_as_written(snippet: Snippet, tmp_path: Path) -> None:
    file = tmp_path / snippet.path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(snippet.code)
    if snippet.how == "run":
        done = run([sys.executable, snippet.path], tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        return
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    done = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", snippet.path], tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\d+ passed", done.stdout) and "failed" not in done.stdout, done.stdout


def test_sparks_install_line_installs_what_its_examples_use() -> None:
    """The packages the examples of docs/spark.md import, or name by serializer or URL."""
    text = (ROOT / "docs" / "spark.md").read_text()
    install = text.split("## Install and register", 1)[1].split("\n## ", 1)[0]
    installed = set(re.findall(r"packages/(runnel-[a-z]+)", install))
    code = "\n".join(s.code for s in snippets() if s.page.name == "spark.md")
    needed = {"runnel-core"}
    needed |= {f"runnel-{m}" for m in re.findall(r"^\s*import runnel_(\w+)", code, re.M)}
    needed |= {f"runnel-{m}" for m in re.findall(r"serializer=\"(avro)\"", code)}
    if "redis://" in code:
        needed.add("runnel-redis")
    assert needed <= installed, needed - installed
