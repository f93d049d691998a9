"""Plugins import only what docs/plugins.md ("What a plugin may import") lists: Runnel's
own plugins and the example plugin are held to it, so the list is the real surface; and
the modules that moved still import, with a warning."""

from __future__ import annotations

import ast
import importlib
import re
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PLUGINS = [
    ROOT / "packages" / name / "src"
    for name in ("runnel-redis", "runnel-avro", "runnel-spark", "runnel-dashboard", "runnel-otel")
] + [ROOT / "tests" / "plugins" / "runnel-example-plugin" / "src"]


def allowed() -> set[str]:
    """The modules the docs' list names (a trailing ``.x`` shorthand under ``runnel.store``
    included)."""
    text = (ROOT / "docs" / "plugins.md").read_text()
    section = text.split("## What a plugin may import", 1)[1].split("\n## ", 1)[0]
    listed = section.split("\n\nThe modules that moved", 1)[0]
    names = set(re.findall(r"`(runnel(?:\.[a-z_]+)*)`", listed))
    names |= {f"runnel.store{short}" for short in re.findall(r"`(\.[a-z_]+)`", listed)}
    return names


def imported(source: Path) -> dict[str, set[str]]:
    """Every runnel module each file imports (at the top, in functions, for typing)."""
    out: dict[str, set[str]] = {}
    for path in source.rglob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "runnel":
                    found.add("runnel")
                elif node.module.startswith("runnel."):
                    found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.split(".")[0] == "runnel")
        out[str(path.relative_to(ROOT))] = found
    return out


def test_the_list_names_modules_that_exist() -> None:
    names = allowed()
    assert {"runnel", "runnel.store", "runnel.store.log", "runnel.commands"} <= names
    for name in names:
        importlib.import_module(name)


def test_plugins_import_only_the_listed_modules() -> None:
    names = allowed()
    wrong = sorted(
        f"{path} imports {module}"
        for source in PLUGINS
        for path, modules in imported(source).items()
        for module in modules
        if module not in names
    )
    assert wrong == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("runnel.transport", "runnel.store.log"),
        ("runnel.coordination", "runnel.store.coordination"),
        ("runnel.schemas", "runnel.store.schemas"),
        ("runnel.synclog", "runnel.store.synclog"),
        ("runnel.jobs.store", "runnel.store.jobs"),
        ("runnel.processing.retry", "runnel.runtime.retry"),
        ("runnel.cli.common", "runnel.commands"),
    ],
)
def test_a_moved_module_still_imports_with_a_warning(old: str, new: str) -> None:
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught)
    moved = importlib.import_module(new)
    for name in module.__all__:
        assert getattr(module, name) is getattr(moved, name)
