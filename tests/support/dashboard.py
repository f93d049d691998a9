"""A real headless Chromium (Debian's, driven through its chromedriver) and a real
`runnel dashboard` process for the dashboard's tests; skipped where Chromium is missing.

``browser`` is a fixture: tests/dashboard/conftest.py registers it, and a test module
elsewhere imports it by name."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

from tests.support.processes import RUNNEL, wait_for

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
URL = re.compile(r"on (http://\S+/) ")
T = TypeVar("T")


@pytest.fixture
def browser() -> Iterator[Any]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(
            "chromium and chromedriver not found (apt-get install chromium chromium-driver)"
        )
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="runnel-chromium-")
    for arg in (
        "--headless=new",
        "--no-sandbox",  # needed as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,1100",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def on_page(check: Callable[[], T], timeout: float = 30.0) -> T:
    """``wait_for(check)``, where a check that reads an element the page has redrawn since
    it was found counts as not met yet: the page replaces its sections on every poll
    (every 2 s), so finding an element and reading or clicking it must be retried as one."""
    from selenium.common.exceptions import StaleElementReferenceException

    def attempt() -> T | None:
        try:
            return check()
        except StaleElementReferenceException:
            return None

    return wait_for(attempt, timeout)  # type: ignore[no-any-return]


class Dashboard:
    """`runnel dashboard` in its own process, on a free port it picks and prints."""

    def __init__(self, target: str, cwd: Path, env: dict[str, str], *extra: str) -> None:
        self.log_path = cwd / "dashboard.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [*RUNNEL, "dashboard", target, "--port", "0", *extra],
            cwd=cwd,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.url: str = wait_for(self._started)

    def _started(self) -> str | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"the dashboard exited:\n{self.log_path.read_text()}")
        found = URL.search(self.log_path.read_text())
        return found.group(1) if found else None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._log.close()


def import_file(path: Path, name: str) -> ModuleType:
    """Import the app module a test wrote, in the test's process too (``name`` unique per
    test, so that two tests' modules of the same file name never meet in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_then_close(mod: ModuleType, call: Callable[[], Any]) -> Any:
    """Run ``call()`` (a coroutine function) against the module's app, then close the app."""

    async def go() -> Any:
        try:
            return await call()
        finally:
            await mod.app.aclose()

    return asyncio.run(go())
