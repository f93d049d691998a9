"""One version for every package: ``runnel.__version__`` (packages/runnel-core/src/runnel/
__init__.py) is the only place it is written; each pyproject reads it from there (hatch's
dynamic version), every pin of one runnel package on another names it, and what is
installed agrees. tools/dist.py refuses to build when a pyproject does not follow."""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement

import runnel

ROOT = Path(__file__).parents[2]
VERSION_FILE = ROOT / "packages" / "runnel-core" / "src" / "runnel" / "__init__.py"
PYPROJECTS = [ROOT / "pyproject.toml", *sorted(ROOT.glob("packages/*/pyproject.toml"))]


def dist_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("runnel_dist_tool", ROOT / "tools" / "dist.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", PYPROJECTS, ids=lambda p: str(p.parent.relative_to(ROOT)) or "/")
def test_each_package_reads_the_one_version(path: Path) -> None:
    config = tomllib.loads(path.read_text())
    assert "version" not in config["project"]
    assert config["project"]["dynamic"] == ["version"]
    source = path.parent / config["tool"]["hatch"]["version"]["path"]
    assert source.resolve() == VERSION_FILE


def pins(path: Path) -> list[Requirement]:
    """The requirements of one pyproject on runnel packages, extras included."""
    project = tomllib.loads(path.read_text())["project"]
    lines = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        lines += extra
    return [Requirement(line) for line in lines if line.startswith("runnel")]


@pytest.mark.parametrize("path", PYPROJECTS, ids=lambda p: str(p.parent.relative_to(ROOT)) or "/")
def test_every_pin_between_packages_names_that_version(path: Path) -> None:
    for requirement in pins(path):
        assert str(requirement.specifier) == f"=={runnel.__version__}", requirement


def test_what_is_installed_has_that_version() -> None:
    names = [tomllib.loads(p.read_text())["project"]["name"] for p in PYPROJECTS]
    assert len(names) == 7
    assert {name: metadata.version(name) for name in names} == dict.fromkeys(
        names, runnel.__version__
    )


def test_the_build_refuses_a_pin_on_another_version() -> None:
    tool = dist_tool()
    assert tool.version() == runnel.__version__
    assert tool.disagreements(runnel.__version__) == []
    wrong = tool.disagreements("9.9.9")
    assert len(wrong) == sum(len(pins(p)) for p in PYPROJECTS) > 10
    assert all("must pin ==9.9.9" in line for line in wrong)


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PINNED = re.compile(r'(runnel(?:-[a-z]+)?(?:\[[^]]*\])?)==(\d[^"\s`]*)')


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_docs_install_this_version_from_the_built_files(page: Path) -> None:
    """An install from ``--find-links`` names the version: 0.2.0.dev0 is a pre-release,
    and without the pin pip takes PyPI's ``runnel``, another project. Every version the
    docs pin is this one."""
    installs = 0
    for line in page.read_text().splitlines():
        if re.search(r"pip install(?: -\S+)* --find-links \S+ .*runnel", line):
            assert PINNED.search(line), line
            installs += 1
        for _, version in PINNED.findall(line):
            assert version == runnel.__version__, line
    assert installs or page.name not in ("README.md", "deploy.md")
