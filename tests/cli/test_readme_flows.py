"""The README's Jobs and State snippets run as the README shows them: the Jobs files
written where their headers say, a real ``runnel worker shop.app:app`` and
``python -m shop.enqueue`` printing what the README says; the State snippet added to the
example app and run on ``memory://``."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import runnel.testing
from tests.support.docs import FILE_HEADER, ROOT, fenced, readme_section
from tests.support.processes import WorkerProcess, env_with


def test_the_jobs_snippets_run_as_shown(tmp_path: Path, redis_url: str) -> None:
    jobs = readme_section("Jobs")
    files = {}
    for _, source in fenced(jobs, "python"):
        header = FILE_HEADER.match(source)
        assert header, f"a Jobs block without its file name: {source[:60]}"
        files[header.group(1)] = source
    assert set(files) == {"shop/app.py", "shop/enqueue.py"}
    assert "empty shop/__init__.py" in files["shop/app.py"].splitlines()[0]
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    for name, source in files.items():
        (tmp_path / name).write_text(source)

    commands = [line for _, block in fenced(jobs, "sh") for line in block.splitlines()]
    worker = next(line for line in commands if "# terminal 1" in line)
    enqueue = next(line for line in commands if "# terminal 2" in line)
    assert worker.split("#")[0].split() == ["runnel", "worker", "shop.app:app"]
    assert enqueue.split("#")[0].split() == ["python", "-m", "shop.enqueue"]
    shown = re.search(r"prints (.+), then (.+)$", enqueue)
    assert shown is not None

    env = env_with(redis_url)
    with WorkerProcess("shop.app:app", tmp_path, env) as running:
        done = subprocess.run(
            [sys.executable, "-m", "shop.enqueue"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert running.stop() == 0, running.output
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [shown.group(1), shown.group(2)]


async def test_the_state_snippet_counts_in_the_example_app(tmp_path: Path) -> None:
    """The table and its reader that the README adds to the example app, on memory://."""
    _, state = fenced(readme_section("State"), "python")[0]
    path = tmp_path / "readme_state.py"
    path.write_text((ROOT / "examples" / "orders.py").read_text() + "\n" + state)
    spec = importlib.util.spec_from_file_location("readme_state", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    fields = {"created_at": "2024-05-01T12:00:00Z", "items": []}
    async with runnel.testing.run(module.app) as t:
        await module.orders.send(
            module.Order(order_id=1, customer="ada", **fields),
            module.Order(order_id=2, customer="bob", **fields),
            module.Order(order_id=3, customer="ada", **fields),
        )
        await t.processed()
        assert await module.orders_of("ada") == 2
        assert await module.orders_of("bob") == 1
