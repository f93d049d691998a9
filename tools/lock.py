"""The lock: the exact version of every package this repository installs, in ``lock/``.

    .venv/bin/python tools/lock.py            # after an input changed: keep the pins that fit
    .venv/bin/python tools/lock.py upgrade    # the newest releases, then the quick suite on them
    .venv/bin/python tools/lock.py check      # fail if lock/ is not what the inputs resolve to

What is locked, and who installs it:

* ``lock/constraints.txt``: hatch (the README's ``.venv/``), every package of the hatch
  environments (hatch.toml: the tests, lint, docs, the benchmarks' Runnel side, the demo)
  and the build backends pip runs for them. The environments install with pip under
  ``PIP_CONSTRAINT`` naming this file (hatch.toml), so they get these versions and no other.
* ``lock/bench-<peer>.txt``: each job queue the benchmarks compare with, in its own
  virtual environment (benchmarks/peers.py).
* ``lock/floor.txt``: the lowest version of each requirement the published packages
  declare (``--resolution lowest-direct``). ``upgrade`` runs the quick suite on it too, so
  the ranges in packages/*/pyproject.toml start at versions that were tested.

The files are resolved for every Python from 3.11 and every platform at once (``uv pip
compile --universal``): markers choose what differs. ``upgrade`` writes the new files,
then builds a fresh environment from each of the two locks and runs the quick suite
(hatch.toml's ``test-quick``) there; if either fails it says so and exits 1, and the new
files stay for you to fix the code or ``git checkout lock/``. Environments hatch built
from the old lock are removed, so the next ``hatch run`` builds them from the new one.

It needs uv, which hatch brings (``.venv/`` after the README's first command).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "lock"
MAIN = LOCK / "constraints.txt"
FLOOR = LOCK / "floor.txt"
PYTHON = "3.11"  # the oldest Python the packages support (requires-python)
TOOLS = ["hatch>=1.16"]
# pip builds the checkout's packages with hatchling and PySpark's sdist with setuptools.
BUILDERS = ["hatchling>=1.26", "setuptools", "wheel"]
HEADER = """\
# {what}
# Written by tools/lock.py from {inputs}; do not edit (see its docstring).
"""


def main() -> int:
    parser = argparse.ArgumentParser(prog="tools/lock.py", description=__doc__.split("\n")[0])
    parser.add_argument("action", nargs="?", default="sync", choices=["sync", "upgrade", "check"])
    args = parser.parse_args()
    if args.action == "check":
        return check()
    before = {path.name: pins(path) for path in LOCK.glob("*.txt")}
    write_all(upgrade=args.action == "upgrade")
    if MAIN.name in report(before):
        forget_hatch_environments()
    if args.action != "upgrade":
        return 0
    failed = [path.name for path in (MAIN, FLOOR) if not quick_suite(path)]
    if failed:
        print(f"Error: the quick suite fails on {' and '.join(failed)}; lock/ holds the new files")
        return 1
    print("the quick suite passes on the newest releases and on the floor")
    return 0


# What to resolve.


def hatch_config() -> dict:
    return tomllib.loads((ROOT / "hatch.toml").read_text())


def workspace_inputs() -> list[str]:
    """Every environment's requirements, the checkout's packages as editable paths."""
    lines: list[str] = []
    for env in hatch_config()["envs"].values():
        for member in env.get("workspace", {}).get("members", []):
            path, features = (
                (member, [])
                if isinstance(member, str)
                else (member["path"], member.get("features", []))
            )
            lines.append(f"-e ./{path}" + (f"[{','.join(features)}]" if features else ""))
        for dependency in env.get("dependencies", []):
            local = re.fullmatch(r"(\S+?)(\[[^]]*\])? @ \{root:uri\}(\S*)", dependency)
            if local:
                lines.append(f"-e .{local.group(3) or ''}{local.group(2) or ''}")
            else:
                lines.append(dependency)
    return sorted(set(lines)) + TOOLS + BUILDERS


def published_requirements() -> list[str]:
    """What the packages a user installs ask for (every extra), but each other."""
    found: set[str] = set()
    for pyproject in [ROOT / "pyproject.toml", *sorted(ROOT.glob("packages/*/pyproject.toml"))]:
        project = tomllib.loads(pyproject.read_text())["project"]
        wanted = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            wanted += extra
        found.update(r for r in wanted if not r.startswith("runnel"))
    return sorted(found)


def peers() -> dict[str, list[str]]:
    tree = ast.parse((ROOT / "benchmarks" / "peers.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "PEERS":
            return ast.literal_eval(node.value)  # type: ignore[arg-type]
    raise SystemExit("Error: benchmarks/peers.py defines no PEERS")


def floor_inputs() -> list[str]:
    """The published requirements at their lowest; the test tools as locked."""
    locked = pins(MAIN)
    tools = [
        f"{name}=={locked[name.lower()][0]}"
        for line in workspace_inputs()
        if not line.startswith("-e")
        and (name := re.split(r"[<>=!~\[ ;]", line)[0])
        and name.lower() in locked
        and line not in TOOLS
    ]
    return published_requirements() + sorted(set(tools))


# Resolving and writing.


def resolve(inputs: list[str], output: Path, *, upgrade: bool, lowest: bool = False) -> None:
    """``uv pip compile`` the inputs into ``output``, preferring the pins already there."""
    with tempfile.TemporaryDirectory() as scratch:
        given = Path(scratch) / "requirements.in"
        given.write_text("\n".join(inputs) + "\n")
        out = Path(scratch) / "lock.txt"
        if output.exists() and not upgrade:
            shutil.copy(output, out)
        command = [
            sys.executable,
            "-m",
            "uv",
            "pip",
            "compile",
            str(given),
            "-o",
            str(out),
            "--universal",
            "--python-version",
            PYTHON,
            "--no-header",
            "--quiet",
            "--annotation-style",
            "line",
            "--system-certs",
        ]
        if upgrade:
            command.append("--upgrade")
        if lowest:
            command += ["--resolution", "lowest-direct"]
        subprocess.run(command, cwd=ROOT, check=True)
        body = [
            line.replace(str(given), "the inputs")
            for line in out.read_text().splitlines()
            if not line.startswith("-e ")
        ]
    what = {
        MAIN.name: "Exact versions of everything the README, .ci/run and hatch.toml install.",
        FLOOR.name: "The lowest versions the published packages accept, as tested.",
    }.get(output.name, f"Exact versions of the {output.stem[6:]} benchmark's environment.")
    inputs_text = "hatch.toml and packages/*/pyproject.toml"
    if output.name.startswith("bench-"):
        inputs_text = "benchmarks/peers.py"
    output.write_text(HEADER.format(what=what, inputs=inputs_text) + "\n".join(body) + "\n")


def write_all(*, upgrade: bool, into: Path = LOCK) -> None:
    into.mkdir(exist_ok=True)
    resolve(workspace_inputs(), into / MAIN.name, upgrade=upgrade)
    resolve(floor_inputs(), into / FLOOR.name, upgrade=upgrade, lowest=True)
    for name, wanted in peers().items():
        resolve(wanted, into / f"bench-{name}.txt", upgrade=upgrade)


def pins(path: Path) -> dict[str, list[str]]:
    """Package name (lower case) to the versions a lock file pins (one per marker)."""
    found: dict[str, list[str]] = {}
    if not path.exists():
        return found
    for line in path.read_text().splitlines():
        match = re.match(r"([A-Za-z0-9._-]+)==(\S+)", line)
        if match:
            found.setdefault(match.group(1).lower(), []).append(match.group(2))
    return found


def report(before: dict[str, dict[str, list[str]]]) -> set[str]:
    """Print what moved; the names of the files that changed."""
    changed: set[str] = set()
    for path in sorted(LOCK.glob("*.txt")):
        old, new = before.get(path.name, {}), pins(path)
        lines = [
            f"  {name}: {shown(old.get(name))} -> {shown(new.get(name))}"
            for name in sorted(set(old) | set(new))
            if old.get(name) != new.get(name)
        ]
        if lines:
            changed.add(path.name)
            print(f"{path.relative_to(ROOT)}:", *lines, sep="\n")
    if not changed:
        print("lock/ unchanged")
    return changed


def shown(versions: list[str] | None) -> str:
    return ", ".join(versions or []) or "-"


def check() -> int:
    """Resolve again into a scratch copy, keeping the pins: any difference is stale."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "lock"
        shutil.copytree(LOCK, copy)
        write_all(upgrade=False, into=copy)
        stale = [p.name for p in sorted(LOCK.glob("*.txt")) if pins(p) != pins(copy / p.name)]
        stale += [p.name for p in sorted(copy.glob("*.txt")) if not (LOCK / p.name).exists()]
    if stale:
        print(
            f"Error: lock/ is out of date ({', '.join(stale)}): run .venv/bin/python tools/lock.py"
        )
        return 1
    print("lock/ is what the inputs resolve to")
    return 0


# Trying a lock.


def quick_suite(lock: Path) -> bool:
    """Build a fresh virtual environment from ``lock`` and run test-quick in it."""
    script = hatch_config()["envs"]["default"]["scripts"]["test-quick"]
    argv = shlex.split(script.replace("{args}", ""))
    with tempfile.TemporaryDirectory(prefix="runnel-lock-") as scratch:
        venv = Path(scratch) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        requirements = [line for line in workspace_inputs() if line not in TOOLS]
        listed = Path(scratch) / "requirements.txt"
        listed.write_text("\n".join(requirements) + "\n")
        env = {**os.environ, "PIP_CONSTRAINT": str(lock)}
        print(f"building an environment from {lock.relative_to(ROOT)}", flush=True)
        subprocess.run(
            [
                python,
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "-r",
                str(listed),
            ],
            cwd=ROOT,
            env=env,
            check=True,
        )
        print(f"running the quick suite on {lock.relative_to(ROOT)}", flush=True)
        return subprocess.run([python, *argv[1:]], cwd=ROOT, env=env).returncode == 0


def forget_hatch_environments() -> None:
    """hatch only adds what is missing to an environment, so one built from the old lock
    would keep its versions: remove them, and the next ``hatch run`` builds afresh."""
    hatch = Path(sys.executable).with_name("hatch")
    if hatch.exists():
        subprocess.run([str(hatch), "env", "prune"], cwd=ROOT, check=False)


if __name__ == "__main__":
    sys.exit(main())
