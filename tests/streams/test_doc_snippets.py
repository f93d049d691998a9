"""The Python examples of the docs that are whole programs or test modules run as written.

Marker convention: an HTML comment on the line right before a ```python block (invisible
on the rendered page) says the block is complete and how to run it:

    <!-- test: run -->     a program: saved in an empty directory and run with python; it
                           must exit 0.
    <!-- test: pytest -->  a test module: saved and run with pytest (pytest-asyncio), with
                           the ``# pyproject.toml`` block shown before it on its page as
                           the project's configuration (so the page shows what the tests
                           need, asyncio_mode = "auto"); every test in it must pass.

A block whose first line is a comment naming a file (``# shop/streams.py: ...``,
``# test_shop.py``) is saved under that path, so its imports work as they would in a
project. Blocks that are parts of a larger example carry no marker. Every block that
calls itself a test module (``# test_*.py``) must be marked. The examples run against
``memory://`` or a redis-server they start themselves.

Every other block is compiled (``await`` at the top level allowed; of a ``>>>`` session,
its input lines): a part of a larger example, or one that needs the reader's Redis and
app around it, must still be valid Python. One that cannot be (pseudo-code) is marked

    <!-- test: illustrative -->

and listed in ``ILLUSTRATIVE`` below, so that a new block is checked by default.
The console sessions (``$ runnel ...``) are played by tests/cli/test_doc_sessions.py.
"""

from __future__ import annotations

import ast
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


MARKED = [s for s in snippets() if s.how in ("run", "pytest")]
ILLUSTRATIVE: set[tuple[str, str]] = set()
"""(page, first line) of the Python blocks marked illustrative: none today."""
COMPILED = [s for s in snippets() if s.how is None]


def test_markers_are_known_and_each_is_followed_by_a_python_block() -> None:
    """run and pytest mark Python blocks; illustrative marks a Python block or a console
    session (tests/cli/test_doc_sessions.py)."""
    for page in PAGES:
        text = page.read_text()
        markers = re.findall(r"<!-- test: (.*?) -->\n```python\n", text)
        assert set(markers) <= {"run", "pytest", "illustrative"}, (page.name, markers)
        marked = [s for s in snippets() if s.how and s.page == page]
        assert len(markers) == len(marked), page.name
        others = re.findall(r"<!-- test: (.*?) -->\n(?!```python\n)", text)
        assert set(others) <= {"illustrative"}, (page.name, others)
        assert len(others) == len(re.findall(r"<!-- test: illustrative -->\n```\w*\n", text))


def test_the_illustrative_blocks_are_the_listed_ones() -> None:
    found = {(s.page.name, s.code.split("\n", 1)[0]) for s in snippets()}
    marked = {
        (s.page.name, s.code.split("\n", 1)[0]) for s in snippets() if s.how == "illustrative"
    }
    assert marked == ILLUSTRATIVE
    assert ILLUSTRATIVE <= found


def source_of(snippet: Snippet) -> str:
    """The block as Python: of a ``>>>`` session, its input lines."""
    if not snippet.code.startswith(">>> "):
        return snippet.code
    lines = snippet.code.splitlines()
    return "\n".join(line[4:] for line in lines if line.startswith((">>> ", "... "))) + "\n"


@pytest.mark.parametrize("snippet", COMPILED, ids=lambda s: s.id)
def test_every_other_block_is_valid_python(snippet: Snippet) -> None:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    compile(source_of(snippet), snippet.id, "exec", flags=flags, dont_inherit=True)


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
    (tmp_path / "pyproject.toml").write_text(shown_configuration(snippet))
    done = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", snippet.path], tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\d+ passed", done.stdout) and "failed" not in done.stdout, done.stdout


def shown_configuration(snippet: Snippet) -> str:
    """The last ``# pyproject.toml`` block of the page before the test module: what the
    page tells the reader to configure; it must be there."""
    text = snippet.page.read_text()
    before = text[: text.index(snippet.code)]
    shown = re.findall(r"^```toml\n(# pyproject\.toml\b.*?)^```$", before, re.M | re.S)
    assert shown, f"{snippet.id}: no pyproject.toml shown before this test module"
    return shown[-1]


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
