"""The example plugin distribution (tests/plugins/runnel-example-plugin), installed for
the test run only: its metadata, with its ``runnel`` entry point, written to a directory
of the run, and that directory and its sources put on the path of this process and of
every process the tests start (``PYTHONPATH``). It is in no environment a user gets
(hatch.toml), so their ``runnel --help`` lists no ``example-hello``."""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

PLUGIN = Path(__file__).parents[1] / "plugins" / "runnel-example-plugin"


def install(site: Path) -> list[Path]:
    """Write the distribution's metadata into ``site``; the paths to import it from."""
    project = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]
    name, version = project["name"], project["version"]
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in entries.items())
            for group, entries in project["entry-points"].items()
        )
    )
    (info / "INSTALLER").write_text("runnel tests (tests/support/example_plugin.py)\n")
    return [site, PLUGIN / "src"]


def activate(paths: list[Path]) -> None:
    """Importable here and in every process started from here."""
    given = [str(p) for p in paths]
    sys.path[:0] = given
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [*given, *filter(None, [os.environ.get("PYTHONPATH")])]
    )
