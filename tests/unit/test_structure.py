"""The shape of runnel-core, read from its imports (every import: at the top, inside
functions and under ``TYPE_CHECKING``): no two modules import each other, nothing below
``app.py`` imports it, and the stream state machine and the job queue stay apart
(docs/architecture.md, "The packages")."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).parents[2] / "packages" / "runnel-core" / "src"
CORE = ROOT / "runnel"

MAY_IMPORT_APP = {"runnel", "runnel.app", "runnel.testing"}
"""The package's face, the app itself and the testing helpers; and runnel.cli.*."""


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_of(path): path for path in CORE.rglob("*.py")}


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The runnel modules ``path`` imports (``from a import b`` is ``a.b`` when that is a
    module, else ``a``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "runnel")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "runnel":
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
    return {m for m in found if m in known}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, known) - {name} for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def faces() -> Iterator[str]:
    """Package faces: ``__init__`` modules, which only hand names on."""
    for path in CORE.rglob("__init__.py"):
        yield module_of(path)


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_two_modules_of_runnel_core_import_each_other() -> None:
    edges = {m: e for m, e in graph().items() if m not in set(faces())}
    assert cycles(edges) == []


def test_nothing_below_the_app_imports_it() -> None:
    wrong = sorted(
        module
        for module, imported in graph().items()
        if "runnel.app" in imported
        and module not in MAY_IMPORT_APP
        and not module.startswith("runnel.cli")
    )
    assert wrong == []


def test_the_stream_state_machine_and_the_job_queue_stay_apart() -> None:
    edges = graph()
    wrong = sorted(
        f"{module} imports {other}"
        for module, imported in edges.items()
        for other in imported
        for mine, theirs in (
            ("runnel.processing", "runnel.jobs"),
            ("runnel.jobs", "runnel.processing"),
        )
        if (module == mine or module.startswith(mine + "."))
        and (other == theirs or other.startswith(theirs + "."))
    )
    assert wrong == []
