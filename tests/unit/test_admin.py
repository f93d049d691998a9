"""runnel.admin, the read models the CLI and the dashboard render: they stay below both
(no import of runnel.cli, runnel.app or click), the dashboard reads them and not the CLI,
and they work on an app's store directly, with no command line around them."""

from __future__ import annotations

import ast
import uuid
from pathlib import Path

import pytest

import runnel.admin
import runnel_dashboard
from runnel import App, Record
from runnel.admin.dead_letters import NotFound, check_partition, select_dead_jobs
from runnel.admin.jobs import jobs_report
from runnel.admin.status import status_report

ADMIN = Path(runnel.admin.__file__).parent
DASHBOARD = Path(runnel_dashboard.__file__).parent


def _imported(path: Path, package: str) -> set[str]:
    """Every module the file (a module of ``package`` itself) imports, anywhere in it
    (TYPE_CHECKING blocks and functions included), as absolute dotted names; ``from X
    import y`` counts as X and X.y."""
    found: set[str] = set()
    here = package.split(".")
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def _under(module: str, *roots: str) -> bool:
    return any(module == root or module.startswith(root + ".") for root in roots)


def test_the_import_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text(
        "import click\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from runnel.app import App\n"
        "def f():\n    from runnel import cli\n    from . import sibling\n"
    )
    found = _imported(package / "m.py", "pkg")
    assert {"click", "runnel.app", "runnel.cli", "pkg.sibling"} <= found


def test_admin_imports_neither_the_cli_nor_the_app_nor_click() -> None:
    modules = sorted(ADMIN.glob("*.py"))
    assert {p.stem for p in modules} >= {"status", "jobs", "dead_letters"}
    wrong = {
        f"{path.name} imports {module}"
        for path in modules
        for module in _imported(path, "runnel.admin")
        if _under(module, "runnel.cli", "runnel.app", "click")
    }
    assert wrong == set()


def test_the_dashboard_reads_admin_not_the_cli() -> None:
    """No module of the dashboard imports runnel.cli: its page and feed read runnel.admin,
    and its command uses runnel.commands, as every plugin's command does."""
    modules = {path.stem: _imported(path, "runnel_dashboard") for path in DASHBOARD.glob("*.py")}
    assert {"snapshot", "server", "sampler", "cli"} <= set(modules)
    assert any(_under(m, "runnel.admin") for m in modules["snapshot"])
    wrong = {
        f"{name}.py imports {module}"
        for name, imported in modules.items()
        for module in imported
        if _under(module, "runnel.cli")
    }
    assert wrong == set()


class Ping(Record):
    key: str


@pytest.fixture
def memory_app() -> App:
    return App(name="adm", redis_url=f"memory://{uuid.uuid4().hex}")


async def test_status_and_the_job_queue_are_read_from_the_store(memory_app: App) -> None:
    app = memory_app
    read = app.stream("read", record=Ping, partition_by="key", partition_count=2)
    unread = app.stream("unread", record=Ping, partition_by="key", partition_count=2)

    @app.processor(read, name="counter")
    async def counter(events: object) -> None:  # never run here
        pass

    @app.job()
    async def add(x: int) -> int:
        return x

    try:
        await unread.send(*[Ping(key=f"k{i}") for i in range(5)])
        report = await status_report(app)
        queue = await jobs_report(app)
    finally:
        await app.aclose()
    assert report["app"] == "adm"
    [proc] = report["processors"]
    assert (proc["name"], proc["stream"], proc["executors"]) == ("counter", "read", [])
    assert [p["state"] for p in proc["partitions"]] == ["unowned", "unowned"]
    [stream] = report["streams"]
    assert stream["name"] == "unread"
    assert sum(p["length"] for p in stream["partitions"]) == 5
    assert (queue["app"], queue["jobs"], queue["queued"], queue["dead"]) == ("adm", ["add"], 0, 0)


async def test_choosing_what_is_not_there_says_what(memory_app: App) -> None:
    app = memory_app
    pings = app.stream("pings", record=Ping, partition_by="key", partition_count=3)
    try:
        with pytest.raises(NotFound, match=r"no job named 'nope'.*\(its jobs: none\)"):
            await select_dead_jobs(app, "nope", ())
        with pytest.raises(NotFound, match=r"no dead job with id 'x' in app adm"):
            await select_dead_jobs(app, None, ("x",))
        assert await select_dead_jobs(app, None, ()) == []
    finally:
        await app.aclose()
    with pytest.raises(NotFound, match=r"--partition 3: pings has partitions 0 to 2"):
        check_partition(pings, 3)
    check_partition(pings, 2)
    check_partition(pings, None)
