"""The README's two first commands, what CI runs, and the shell commands of the docs work
on Debian's and Ubuntu's own Python, which refuses `pip install` outside a virtual
environment (PEP 668): nothing is installed with a bare `pip` or `python3 -m pip`, and
CI runs the README's test command exactly as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BLOCK = re.compile(r"^```(?:sh|bash|shell)\n(.*?)^```$", re.M | re.S)


def readme_commands() -> list[str]:
    """The commands of the README's first code block, without their comments."""
    block = SHELL_BLOCK.search(README.read_text())
    assert block is not None
    return [line.split("   #")[0].strip() for line in block.group(1).splitlines() if line]


def test_the_readme_starts_with_the_demo_and_the_test_command() -> None:
    demo, test = readme_commands()
    assert demo.endswith("hatch run demo:run"), demo
    assert test.endswith("hatch run test"), test


def test_ci_runs_the_readmes_test_command_as_written() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci


def shell_commands(path: Path) -> list[str]:
    """Each command line of a page's sh/bash blocks (of .ci/run: each line), without its
    comment. Commands quoted in the prose are not looked at."""
    if path.suffix == ".md":
        blocks = [m.group(1) for m in SHELL_BLOCK.finditer(path.read_text())]
    else:
        blocks = [path.read_text()]
    lines = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line]


@pytest.mark.parametrize("path", [*PAGES, ROOT / ".ci" / "run"], ids=lambda p: p.name)
def test_nothing_is_installed_into_the_system_python(path: Path) -> None:
    """`pip install` runs the pip of a virtual environment, and hatch is the one there."""
    wrong = [
        line
        for line in shell_commands(path)
        if re.search(r"(?<![\w/])pip3? install|python3? -m pip|python3? -m hatch", line)
    ]
    assert not wrong, wrong


def test_the_virtual_environment_is_neither_linted_nor_collected() -> None:
    """`.venv/` sits in the checkout: ruff skips it (.gitignore, and its own defaults) and
    pytest only looks under tests/."""
    assert ".venv/" in (ROOT / ".gitignore").read_text().splitlines()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'testpaths = ["tests"]' in pyproject
    assert "\nexclude = [" not in pyproject.split("[tool.ruff]", 1)[1].split("\n[", 1)[0]


def test_the_quick_subset_the_readme_offers_exists() -> None:
    """The README says what the full suite costs and offers `hatch run test-quick` beside
    it: a script of hatch.toml's default environment."""
    import tomllib

    readme = README.read_text()
    assert "about 40 minutes" in readme and ".venv/bin/hatch run test-quick" in readme
    scripts = tomllib.loads((ROOT / "hatch.toml").read_text())["envs"]["default"]["scripts"]
    assert isinstance(scripts["test-quick"], str), "one pytest run: one summary line"
    assert scripts["test-quick"].startswith("python -m pytest tests/")
