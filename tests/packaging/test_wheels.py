"""The distributions tools/dist.py builds (README.md, Installing), installed as a user
would: into a new virtual environment outside the checkout, with ``pip install
--find-links DIST "runnel[...]==VERSION"``. Every runnel package must come from those
files (the index may give the third-party ones, but the name ``runnel`` on PyPI is
someone else's), nothing is editable, and what is installed runs: the example app end to
end on the embedded server, ``runnel --version`` and ``runnel plugins``.

pip runs with this environment's settings (its configuration, proxy and index, and
``PIP_CONSTRAINT``, the lock, which hatch.toml sets), so third-party packages come at the
versions the lock pins, from pip's cache when it has them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

import runnel

ROOT = Path(__file__).parents[2]
VERSION = runnel.__version__
EXTRAS = sorted(
    tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
)
PLUGINS = ["runnel-avro", "runnel-dashboard", "runnel-otel", "runnel-redis", "runnel-spark"]

pytestmark = pytest.mark.xdist_group("packaging")  # one build of dist/ under loadgroup


def build(out: Path) -> Path:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "dist.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every package's sdist and wheel, built once for this module."""
    return build(tmp_path_factory.mktemp("dist"))


def user_env(venv: Path) -> dict[str, str]:
    """This process's environment (pip's settings included) without what ties it to the
    checkout: its virtual environment, PYTHONPATH (the tests' example plugin), RUNNEL_*."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith("RUNNEL_")
    }
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    return env


def run(venv: Path, *args: str, cwd: Path, timeout: float = 900) -> str:
    done = subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        cwd=cwd,
        env=user_env(venv),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


def new_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    return path


def install(venv: Path, dist: Path, extras: str, *more: str) -> list[dict[str, Any]]:
    """``pip install --find-links dist "runnel[extras]==VERSION"``; pip's report of what
    it installed (or, with ``--dry-run``, would install)."""
    report = venv.parent / f"report-{extras}.json"
    run(
        venv,
        "pip",
        "install",
        "-q",
        "--find-links",
        str(dist),
        "--report",
        str(report),
        *more,
        f"runnel[{extras}]=={VERSION}",
        cwd=venv.parent,
    )
    return json.loads(report.read_text())["install"]


def runnel_from_dist(report: list[dict[str, Any]], dist: Path) -> set[str]:
    """The runnel packages of a pip report, each checked to come from ``dist``."""
    found = set()
    for item in report:
        name = item["metadata"]["name"]
        if name.startswith("runnel"):
            assert item["metadata"]["version"] == VERSION, item["metadata"]
            assert item["download_info"]["url"].startswith(dist.as_uri() + "/"), item
            found.add(name)
    return found


INSTALLED = """
import importlib.metadata as m, json, sys
print(json.dumps({
    d.metadata["Name"]: [d.version, str(d.locate_file("")), d.read_text("direct_url.json")]
    for d in m.distributions() if d.metadata["Name"].startswith("runnel")
}))
"""


def assert_installed_from_files(venv: Path, cwd: Path, names: set[str]) -> None:
    """Each runnel package is in the venv's site-packages, at VERSION, not editable."""
    installed = json.loads(run(venv, "python", "-c", INSTALLED, cwd=cwd))
    assert set(installed) == names
    for name, (version, location, direct_url) in installed.items():
        assert version == VERSION, name
        assert Path(location).is_relative_to(venv) and direct_url is None, (name, location)


def test_the_build_is_reproducible_and_typed(dist: Path, tmp_path: Path) -> None:
    again = build(tmp_path / "again")
    files = sorted(p.name for p in dist.iterdir())
    assert len(files) == 14  # an sdist and a wheel of each of the 7 packages
    assert files == sorted(p.name for p in again.iterdir())
    for name in files:
        assert (dist / name).read_bytes() == (again / name).read_bytes(), name
    for wheel in dist.glob("runnel_*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            assert any(n.endswith("/py.typed") for n in zf.namelist()), wheel.name


def test_every_extra_takes_every_runnel_package_from_dist(dist: Path, tmp_path: Path) -> None:
    """A dry run per extra: what pip would install, runnel packages from dist/ alone."""
    venv = new_venv(tmp_path / "venv")
    expected = {
        "redis": {"runnel-redis"},
        "embedded": {"runnel-redis"},
        "avro": {"runnel-avro"},
        "spark": {"runnel-spark", "runnel-redis"},
        "dashboard": {"runnel-dashboard"},
        "otel": {"runnel-otel"},
        "all": set(PLUGINS),
    }
    for extra in EXTRAS:
        report = install(venv, dist, extra, "--dry-run", "--ignore-installed")
        wanted = {"runnel", "runnel-core", *expected.get(extra, set())}
        assert runnel_from_dist(report, dist) == wanted, extra


def test_installed_from_dist_the_example_app_runs(dist: Path, tmp_path: Path) -> None:
    venv = new_venv(tmp_path / "venv")
    report = install(venv, dist, "redis,avro,embedded")
    names = {"runnel", "runnel-core", "runnel-redis", "runnel-avro"}
    assert runnel_from_dist(report, dist) == names
    project = tmp_path / "project"
    (project / "examples").mkdir(parents=True)
    for name in ("demo.py", "orders.py"):
        shutil.copy(ROOT / "examples" / name, project / "examples" / name)
    (project / "pyproject.toml").write_text("")  # the project the embedded server is for
    assert_installed_from_files(venv, project, names)

    assert run(venv, "runnel", "--version", cwd=project).splitlines() == [
        f"runnel {VERSION}",
        f"runnel-avro {VERSION}",
        f"runnel-redis {VERSION}",
    ]
    plugins = run(venv, "runnel", "plugins", cwd=project)
    assert f"avro: entry point avro = runnel_avro.plugin (runnel-avro {VERSION})" in plugins
    assert f"redis: entry point redis = runnel_redis.plugin (runnel-redis {VERSION})" in plugins
    out = run(venv, "python", "examples/demo.py", "5", cwd=project, timeout=300)
    assert "processed 5 of 5 orders, each once, in order per customer" in out, out
    assert "(stopped the embedded redis-server this demo started)" in out


def test_all_installs_every_plugin_from_dist(dist: Path, tmp_path: Path) -> None:
    venv = new_venv(tmp_path / "venv")
    names = {"runnel", "runnel-core", *PLUGINS}
    assert runnel_from_dist(install(venv, dist, "all"), dist) == names
    assert_installed_from_files(venv, tmp_path, names)
    assert run(venv, "runnel", "--version", cwd=tmp_path).splitlines() == [
        f"runnel {VERSION}",
        *(f"{name} {VERSION}" for name in PLUGINS),
    ]
    plugins = run(venv, "runnel", "plugins", cwd=tmp_path)
    for name in PLUGINS:
        assert f"({name} {VERSION})" in plugins, plugins
