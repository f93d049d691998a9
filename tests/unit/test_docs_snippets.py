"""The Python blocks of the README and docs/ are valid where they say they run.

A block that declares something (a function, a class, a decorated job or processor) or is
headed by a file name (``# shop/app.py``) is module code: a worker imports it, so it must
compile as a module, where ``await`` outside a function is a ``SyntaxError``. Any other
block is a fragment of async code (``await orders.send(...)``) and must compile as such.
A ``>>>`` block is an interactive session with top-level await, checked line by line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import pytest

from tests.support.docs import FILE_HEADER, PAGES, fenced


@dataclass
class Snippet:
    page: str
    line: int
    source: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def snippets() -> list[Snippet]:
    return [
        Snippet(page.name, line, source)
        for page in PAGES
        for line, source in fenced(page.read_text(), "python")
    ]


def is_module(source: str) -> bool:
    """Module code: headed by a file name, or declaring something at its top level."""
    if FILE_HEADER.match(source):
        return True
    tree = ast.parse(source)
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        for node in tree.body
    )


def check(snippet: Snippet) -> None:
    """Raise SyntaxError unless the snippet compiles as what it is."""
    if snippet.source.startswith(">>> "):
        for line in snippet.source.splitlines():
            if line.startswith(">>> "):
                compile(line[4:], snippet.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    elif is_module(snippet.source):
        compile(snippet.source, snippet.where, "exec")
    else:
        compile(snippet.source, snippet.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


@pytest.mark.parametrize("snippet", snippets(), ids=lambda s: s.where)
def test_each_python_block_compiles_as_what_it_is(snippet: Snippet) -> None:
    check(snippet)


def test_the_check_refuses_top_level_await_in_module_code() -> None:
    """What the README's Jobs block was: a job declared, then awaited at the top level."""
    declared = "@app.job\nasync def resize(i: int) -> str: ...\n\nr = await resize.delay(7)\n"
    headed = "# shop/enqueue.py\nr = await resize.delay(7)\n"
    for source in (declared, headed):
        with pytest.raises(SyntaxError, match="outside"):
            check(Snippet("t.md", 1, source))
    check(Snippet("t.md", 1, "r = await resize.delay(7)\n"))  # a fragment of async code


def test_there_are_blocks_of_both_kinds() -> None:
    kinds = {is_module(s.source) for s in snippets() if not s.source.startswith(">>> ")}
    assert kinds == {True, False}
