"""The lock (lock/, written by tools/lock.py) covers every requirement the repository
declares, within its range; the published ranges start where lock/floor.txt was tested;
and the environment running these tests was built from the lock it names."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).parents[2]
LOCK = ROOT / "lock"


def pins(path: Path) -> dict[str, str]:
    """What a lock pins on this interpreter: name to version (markers evaluated)."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("  #")[0].strip()
        if not line or line.startswith("#"):
            continue
        requirement, _, marker = line.partition(";")
        if marker.strip() and not Marker(marker.strip()).evaluate():
            continue
        name, version = requirement.strip().split("==")
        found[canonicalize_name(name)] = version
    return found


def published() -> list[Requirement]:
    """Every third-party requirement of the packages a user installs, extras included."""
    found = []
    for pyproject in [ROOT / "pyproject.toml", *sorted(ROOT.glob("packages/*/pyproject.toml"))]:
        project = tomllib.loads(pyproject.read_text())["project"]
        lines = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            lines += extra
        found += [Requirement(line) for line in lines if not line.startswith("runnel")]
    return found


def environments() -> list[Requirement]:
    """The third-party requirements hatch.toml's environments list themselves."""
    config = tomllib.loads((ROOT / "hatch.toml").read_text())
    return [
        Requirement(line)
        for env in config["envs"].values()
        for line in env.get("dependencies", [])
        if "{root:uri}" not in line
    ]


@pytest.mark.parametrize("requirement", [*published(), *environments()], ids=str)
def test_every_requirement_is_locked_within_its_range(requirement: Requirement) -> None:
    locked = pins(LOCK / "constraints.txt")
    name = canonicalize_name(requirement.name)
    assert name in locked, f"{name} is not in lock/constraints.txt: run tools/lock.py"
    assert requirement.specifier.contains(locked[name], prereleases=True), (
        f"{requirement} but lock/constraints.txt pins {locked[name]}: run tools/lock.py"
    )


@pytest.mark.parametrize("requirement", published(), ids=str)
def test_each_published_range_starts_at_a_tested_version(requirement: Requirement) -> None:
    """lock/floor.txt holds the lowest version each range allows, and tools/lock.py
    upgrade runs the quick suite on it: a range never starts below what was tested."""
    floor = pins(LOCK / "floor.txt")
    lowest = [s.version for s in requirement.specifier if s.operator in (">=", "==")]
    assert lowest, f"{requirement} has no lower bound"
    found = floor.get(canonicalize_name(requirement.name))
    assert found is not None and Version(found) == Version(lowest[0]), (
        f"{requirement}: lock/floor.txt tested {found}; raise the bound to it, or run "
        "tools/lock.py upgrade"
    )


def test_each_benchmark_peer_has_a_lock() -> None:
    tree = ast.parse((ROOT / "benchmarks" / "peers.py").read_text())
    names = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "PEERS"
    )
    for name, wanted in names.items():
        locked = pins(LOCK / f"bench-{name}.txt")
        for line in wanted:
            requirement = Requirement(line)
            version = locked.get(canonicalize_name(requirement.name))
            assert version and requirement.specifier.contains(version), (name, line)


def test_hatch_installs_with_pip_under_the_lock() -> None:
    config = tomllib.loads((ROOT / "hatch.toml").read_text())["envs"]
    for name, env in config.items():
        if env.get("workspace") or env.get("dependencies"):
            assert env.get("installer") == "pip", name
            assert env["env-vars"]["PIP_CONSTRAINT"] == "{root}/lock/constraints.txt", name


def test_this_environment_has_the_versions_of_its_lock() -> None:
    """hatch only installs what is missing, so an environment built before the lock moved
    keeps older versions: say so rather than test something else than CI does."""
    named = os.environ.get("PIP_CONSTRAINT", "")
    if not named or Path(named).resolve().parent != LOCK.resolve():
        pytest.skip("not an environment built from lock/ (PIP_CONSTRAINT names no lock)")
    locked = pins(Path(named))
    stale = sorted(
        f"{dist.metadata['Name']} {dist.version} (locked: {locked[name]})"
        for dist in importlib.metadata.distributions()
        if (name := canonicalize_name(dist.metadata["Name"])) in locked
        and dist.version != locked[name]
        and not re.match(r"runnel", name)
    )
    assert not stale, (
        "this environment is older than the lock; remove it (.venv/bin/hatch env remove) "
        f"and run the command again: {stale}"
    )
