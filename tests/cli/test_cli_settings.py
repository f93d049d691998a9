"""`runnel settings` lists every setting as docs/cli.md shows, and an app given a setting
that does not exist fails every command with the line docs/cli.md shows, naming the
setting meant and that command."""

from __future__ import annotations

import re
from pathlib import Path

from runnel.settings import Settings
from tests.support.processes import cli, env_with

CLI_MD = Path(__file__).parents[2] / "docs" / "cli.md"


def section() -> list[str]:
    """The code blocks of docs/cli.md's `runnel settings` section."""
    text = CLI_MD.read_text()
    start = text.index("\n## runnel settings\n")
    part = text[start : text.index("\n## ", start + 1)]
    return re.findall(r"^```\n(.*?)^```$", part, re.M | re.S)


def test_the_listing_is_every_setting_as_the_docs_show(tmp_path: Path, redis_url: str) -> None:
    synopsis, first_lines, _ = section()
    assert synopsis == "runnel settings\n"
    done = cli("settings", cwd=tmp_path, env=env_with(redis_url))
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[: len(first_lines.splitlines())] == first_lines.splitlines()
    listed = [line.split()[:2] for line in lines[1:]]
    assert listed == [[n, f"RUNNEL_{n.upper()}"] for n in sorted(Settings.model_fields)]
    shown = {line.split()[0]: line.split(maxsplit=2)[2] for line in lines[1:]}
    assert (shown["redis_url"], shown["default_hasher"]) == ('"redis+embedded://"', "md5")
    assert (shown["default_exception_policy"], shown["metrics_port"]) == ("halt", "None")


def test_an_unknown_setting_names_the_one_meant(tmp_path: Path, redis_url: str) -> None:
    *_, said = section()
    (tmp_path / "typo.py").write_text(
        "from runnel import App\n\napp = App(name='typo', prefetch_count=5)\n"
    )
    for args in (["status", "typo:app"], ["worker", "typo:app"]):
        done = cli(*args, cwd=tmp_path, env=env_with(redis_url))
        assert (done.returncode, done.stdout, done.stderr) == (1, "", said), args
