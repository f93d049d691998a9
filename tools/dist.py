"""Build the sdist and the wheel of every package of this repository into ``dist/``.

    .venv/bin/hatch run dist               # or: .venv/bin/python tools/dist.py
    .venv/bin/hatch run dist --out DIR     # somewhere else than dist/

The packages: the umbrella ``runnel`` (the repository root) and each of ``packages/*``.
Each sdist is built from the checkout, then its wheel is built from that sdist (unpacked
in a temporary directory), so a wheel holds only what the sdist ships and the sdist is
known to build. Both are made by the hatchling this interpreter has, the version the
lock pins (lock/constraints.txt), without an isolated build environment: nothing is
fetched, and two runs on the same commit give the same bytes (hatchling's reproducible
builds: fixed timestamps, or ``SOURCE_DATE_EPOCH`` when set).

Before building, the versions are checked: every package takes its version from
``runnel.__version__`` (packages/runnel-core/src/runnel/__init__.py) and every pin of
one runnel package on another must name that same version.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION_FILE = ROOT / "packages" / "runnel-core" / "src" / "runnel" / "__init__.py"


def package_dirs() -> list[Path]:
    """The umbrella first, then each package of packages/."""
    return [ROOT, *sorted(p.parent for p in ROOT.glob("packages/*/pyproject.toml"))]


def version() -> str:
    """``runnel.__version__``, read from its file (the one place the version is kept)."""
    found = re.search(r'^__version__ = "([^"]+)"$', VERSION_FILE.read_text(), re.M)
    if found is None:
        raise SystemExit(f"Error: no __version__ in {VERSION_FILE}")
    return found.group(1)


def disagreements(expected: str) -> list[str]:
    """Where a pyproject does not follow ``expected``: a static version, or a pin of a
    runnel package on another version."""
    wrong = []
    for directory in package_dirs():
        path = directory / "pyproject.toml"
        where = path.relative_to(ROOT)
        project = tomllib.loads(path.read_text())["project"]
        if "version" in project or "version" not in project.get("dynamic", []):
            wrong.append(f"{where}: the version must be dynamic (from runnel.__version__)")
        requirements = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            requirements += extra
        for requirement in requirements:
            pin = re.fullmatch(r"(runnel(?:-[a-z]+)?)(\[[^]]*\])?\s*(.*)", requirement)
            if pin and pin.group(3) != f"=={expected}":
                wrong.append(f"{where}: {requirement!r} must pin =={expected}")
    return wrong


def hatchling(*args: str, cwd: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", *args], cwd=cwd, check=True, stdout=sys.stderr
    )


def build(directory: Path, out: Path) -> list[Path]:
    """The sdist of ``directory``, and the wheel built from that sdist, into ``out``."""
    with tempfile.TemporaryDirectory(prefix="runnel-dist-") as scratch:
        sdists = Path(scratch) / "sdist"
        hatchling("-t", "sdist", "-d", str(sdists), cwd=directory)
        (sdist,) = sdists.glob("*.tar.gz")
        with tarfile.open(sdist) as tar:
            # The "data" filter (no links out, no devices) exists from Python 3.11.4 on.
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(Path(scratch) / "src", **safe)
        (unpacked,) = (Path(scratch) / "src").iterdir()
        wheels = Path(scratch) / "wheel"
        hatchling("-t", "wheel", "-d", str(wheels), cwd=unpacked)
        (wheel,) = wheels.glob("*.whl")
        return [Path(shutil.copy(sdist, out)), Path(shutil.copy(wheel, out))]


def missing_markers(wheel: Path) -> list[str]:
    """The top-level packages of a wheel without a ``py.typed`` (PEP 561) beside them."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    packages = {n.split("/")[0] for n in names if n.endswith("/__init__.py") and n.count("/") == 1}
    return sorted(p for p in packages if f"{p}/py.typed" not in names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/dist.py", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="default: dist/")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("hatchling") is None:
        print(
            f"Error: {sys.executable} has no hatchling; run .venv/bin/python tools/dist.py "
            "or .venv/bin/hatch run dist (README.md, Installing)",
            file=sys.stderr,
        )
        return 1
    expected = version()
    wrong = disagreements(expected)
    if wrong:
        print("Error: the versions disagree: " + "; ".join(wrong), file=sys.stderr)
        return 1
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("runnel-*.tar.gz"), *out.glob("runnel-*.whl")]:
        old.unlink()  # files of an older version would be found by --find-links too
    for old in [*out.glob("runnel_*.tar.gz"), *out.glob("runnel_*.whl")]:
        old.unlink()
    try:
        built = [path for directory in package_dirs() for path in build(directory, out)]
    except subprocess.CalledProcessError as exc:  # hatchling said why, above
        print(f"Error: {' '.join(exc.cmd[1:])} failed (exit {exc.returncode})", file=sys.stderr)
        return 1
    for wheel in (p for p in built if p.suffix == ".whl"):
        if missing := missing_markers(wheel):
            print(f"Error: {wheel.name} has no py.typed in {', '.join(missing)}", file=sys.stderr)
            return 1
    for path in built:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
