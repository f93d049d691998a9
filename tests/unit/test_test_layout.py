"""The layout of tests/ (tests/README.md): helpers come from tests/support, never from a
conftest.py, so a conftest holds only fixtures and hooks; and every folder of tests is
one a newcomer can run on its own, holding a conftest.py or test files."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
NOT_TESTS = ("support", "plugins")
"""The folders of tests/ that hold no tests, with everything under them."""


def python_files() -> list[Path]:
    """Every module of tests/, but the plugin distributions' (not tests)."""
    return sorted(p for p in TESTS.rglob("*.py") if p.relative_to(TESTS).parts[0] != "plugins")


def holds_tests(folder: Path) -> bool:
    parts = folder.relative_to(TESTS).parts
    if parts[:1] and parts[0] in NOT_TESTS:
        return False
    return not any(part == "__pycache__" or part.startswith(".") for part in parts)


def conftest_imports(source: str) -> list[str]:
    """Each import of a conftest module in ``source``, as written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            names = [alias.name for alias in node.names]
            if module.split(".")[-1] == "conftest" or "conftest" in names:
                found.append(f"from {module} import {', '.join(names)}")
        elif isinstance(node, ast.Import):
            found += [
                f"import {alias.name}"
                for alias in node.names
                if alias.name.split(".")[-1] == "conftest"
            ]
    return found


def test_nothing_imports_from_a_conftest() -> None:
    offenders = {
        str(path.relative_to(TESTS)): found
        for path in python_files()
        if (found := conftest_imports(path.read_text()))
    }
    assert not offenders, f"import these from tests/support instead: {offenders}"


def test_the_check_sees_every_form_of_a_conftest_import() -> None:
    """So that the test above cannot pass by missing a form."""
    forms = [
        "from .conftest import make_app",
        "from ..conftest import UNREACHABLE",
        "from tests.cli.conftest import Project",
        "from . import conftest",
        "import tests.conftest",
    ]
    for form in forms:
        assert conftest_imports(form) == [form], form
    assert not conftest_imports("from tests.support.apps import make_app\nimport conftests\n")


def test_every_folder_of_tests_has_a_conftest_or_test_files() -> None:
    folders = [d for d in [TESTS, *TESTS.rglob("*")] if d.is_dir() and holds_tests(d)]
    empty = [
        str(d.relative_to(TESTS))
        for d in folders
        if not (d / "conftest.py").exists() and not any(d.glob("test_*.py"))
    ]
    assert len(folders) > 5
    assert not empty, f"folders of tests/ with neither conftest.py nor test files: {empty}"


def test_no_test_plugin_is_in_an_environment_users_get() -> None:
    """`hatch shell`, `hatch run` and `hatch run demo:run` give hatch.toml's environments:
    the example plugin of tests/plugins is installed by the test run itself
    (tests/support/example_plugin.py), so a user's `runnel --help` lists no test command."""
    import tomllib

    envs = tomllib.loads((TESTS.parent / "hatch.toml").read_text())["envs"]
    named = [
        (env, dependency)
        for env, settings in envs.items()
        for dependency in settings.get("dependencies", [])
        if "tests/" in dependency
    ]
    assert not named, named
