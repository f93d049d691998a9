"""`runnel --version`, `--help` everywhere, and that the installed `runnel` is this checkout's."""

from __future__ import annotations

import importlib.metadata as metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.support.processes import cli

VERSION = "0.2.0.dev0"
CHECKOUT = Path(__file__).resolve().parents[2]
CORE_SRC = CHECKOUT / "packages" / "runnel-core" / "src"

COMMANDS = [
    [],
    ["worker"],
    ["send"],
    ["sendmany"],
    ["processor"],
    ["processor", "reset"],
    ["embedded"],
    ["embedded", "start"],
    ["embedded", "status"],
    ["embedded", "stop"],
    ["plugins"],
]


def console_script() -> str:
    """The `runnel` script installed next to this interpreter (not a pyenv shim)."""
    path = Path(sys.executable).parent / "runnel"
    assert path.exists(), f"no runnel console script next to {sys.executable}"
    return str(path)


def test_version(tmp_path: Path) -> None:
    done = cli("--version", cwd=tmp_path, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert VERSION in done.stdout


def test_console_script_is_ours(tmp_path: Path) -> None:
    done = subprocess.run(
        [console_script(), "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"runnel {VERSION}"
    # Every plugin of the repository, and a third party's: the tests' example plugin.
    for name in ("runnel-avro", "runnel-dashboard", "runnel-otel", "runnel-redis"):
        assert f"{name} {VERSION}" in lines[1:], lines
    assert "runnel-example-plugin 0.1.0" in lines[1:], lines
    assert lines[1:] == sorted(lines[1:])
    assert "runnel-core" not in done.stdout


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "runnel")
def test_help(tmp_path: Path, command: list[str]) -> None:
    done = cli(*command, "--help", cwd=tmp_path, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: runnel"), done.stdout
    assert " ".join(["runnel", *command]) in done.stdout.splitlines()[0]


def test_top_level_help_lists_every_command(tmp_path: Path) -> None:
    done = cli("--help", cwd=tmp_path, env=dict(os.environ))
    listed = done.stdout.split("Commands:", 1)[1]
    for name in ("worker", "send", "sendmany", "processor", "embedded", "plugins"):
        assert f"\n  {name} " in listed, name


@pytest.mark.parametrize("dist", ["runnel", "runnel-core"])
def test_distribution_versions(dist: str) -> None:
    assert metadata.version(dist) == VERSION


def test_umbrella_requires_core() -> None:
    requires = [Requirement(r) for r in metadata.requires("runnel") or []]
    core = [r for r in requires if r.name == "runnel-core" and r.marker is None]
    assert core, requires
    assert VERSION in core[0].specifier


def test_console_script_comes_from_core() -> None:
    [entry] = [e for e in metadata.entry_points(group="console_scripts") if e.name == "runnel"]
    assert entry.value == "runnel.cli:main"
    assert entry.dist is not None and entry.dist.name == "runnel-core"


def test_imported_runnel_is_this_checkout(tmp_path: Path) -> None:
    """Imported from elsewhere (no checkout on sys.path), `runnel` is still this source tree."""
    code = "import runnel, runnel.cli; print(runnel.__file__); print(runnel.__version__)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    path, version = done.stdout.split()
    assert Path(path).resolve().is_relative_to(CORE_SRC.resolve()), path
    assert version == VERSION
