"""Asking for what an uninstalled Runnel package provides (the avro serializer, the zstd
compressor, redis:// URLs, `runnel spark`) says what to install, in one `Error:` line.

The test environment has every package installed, so these tests run `python -m runnel`
in a virtual environment that sees the test environment's site-packages minus the
runnel-* plugins, zstandard and lz4: runnel-core on its own, as after
`pip install -e packages/runnel-core`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from importlib.metadata import distributions
from pathlib import Path

import pytest

LEFT_OUT = {
    "runnel",
    "runnel-avro",
    "runnel-dashboard",
    "runnel-example-plugin",
    "runnel-otel",
    "runnel-redis",
    "runnel-spark",
    "zstandard",
    "lz4",
}

APP = """
from runnel import App, Record

app = App(name="missing"{url})


class Ping(Record):
    key: str


pings = app.stream("pings", record=Ping, partition_by="key", serializer={serializer!r})
"""


@pytest.fixture(scope="module")
def core_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Python of a virtual environment holding runnel-core and its requirements only."""
    venv = tmp_path_factory.mktemp("core-only") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    target = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    site = Path(sysconfig.get_paths()["purelib"])
    left_out = set()
    for dist in distributions(path=[str(site)]):
        if dist.metadata["Name"].lower().replace("_", "-") in LEFT_OUT:
            left_out.update(Path(f).parts[0] for f in dist.files or () if not f.is_absolute())
    assert "runnel_avro" in str(left_out) and "zstandard" in left_out, left_out
    for entry in site.iterdir():
        if entry.name not in left_out and not (target / entry.name).exists():
            (target / entry.name).symlink_to(entry)
    return python


def runnel(python: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("RUNNEL_")}
    return subprocess.run(
        [str(python), "-m", "runnel", *args],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    err = done.stderr.strip()
    assert err.startswith("Error: ") and "\n" not in err, done.stderr
    assert "Traceback" not in done.stderr
    return err


def test_the_environment_has_runnel_core_and_nothing_else_of_runnel(
    core_only: Path, tmp_path: Path
) -> None:
    done = runnel(core_only, "plugins", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("codecs: built-in"), done.stdout
    assert "redis" not in done.stdout and "avro" not in done.stdout, done.stdout
    assert "zstd" not in done.stdout and "lz4" not in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("serializer", "named"),
    [
        ("avro", "serializer 'avro' comes with the runnel-avro plugin, which is not installed: "
         "install runnel[avro] (from a checkout: pip install -e packages/runnel-avro)"),
        ("json+zstd", "compressor 'zstd' needs the zstandard package, which is not "
         'installed: install runnel[zstd] (from a checkout: pip install -e '
         '"packages/runnel-core[zstd]")'),
        ("msgpack+lz4", "compressor 'lz4' needs the lz4 package"),
    ],
)  # fmt: skip
def test_a_codec_of_a_package_not_installed_says_what_to_install(
    core_only: Path, tmp_path: Path, serializer: str, named: str
) -> None:
    source = APP.format(url=', redis_url="memory://missing"', serializer=serializer)
    (tmp_path / "appmod.py").write_text(textwrap.dedent(source))
    err = one_error_line(runnel(core_only, "send", "appmod:pings", '{"key": "a"}', cwd=tmp_path))
    assert named in err, err


def test_a_redis_url_without_runnel_redis_says_what_to_install(
    core_only: Path, tmp_path: Path
) -> None:
    (tmp_path / "appmod.py").write_text(textwrap.dedent(APP.format(url="", serializer="json")))
    done = runnel(
        core_only,
        "send",
        "appmod:pings",
        '{"key": "a"}',
        cwd=tmp_path,
        RUNNEL_REDIS_URL="redis://bob:secret@127.0.0.1:1/0",
    )
    err = one_error_line(done)
    assert (
        "no transport for redis:// URLs; known: memory://; redis:// comes with the "
        "runnel-redis plugin, which is not installed: install runnel[redis] "
        "(from a checkout: pip install -e packages/runnel-redis)"
    ) in err, err
    assert "secret" not in done.stdout + done.stderr


@pytest.mark.parametrize("command", ["avro", "spark", "dashboard"])
def test_a_command_of_a_plugin_not_installed_says_what_to_install(
    core_only: Path, tmp_path: Path, command: str
) -> None:
    err = one_error_line(runnel(core_only, command, "schema", "appmod:pings", cwd=tmp_path))
    # runnel-spark requires runnel-redis, which is not published either.
    also = "packages/runnel-redis -e " if command == "spark" else ""
    assert err == (
        f"Error: `runnel {command}` comes with the runnel-{command} plugin, which is not "
        f"installed: install runnel[{command}] (from a checkout: pip install -e "
        f"{also}packages/runnel-{command})"
    )


def test_the_session_of_cli_md_without_the_avro_plugin(core_only: Path, tmp_path: Path) -> None:
    """docs/cli.md, "Commands from plugins", as printed where runnel-avro is not installed."""
    from tests.cli.test_doc_sessions import session, steps

    [(env, args, shown)] = steps(session(("cli.md", "Commands from plugins", 0)).body)
    (tmp_path / "shop.py").write_text(APP.format(url="", serializer="json"))
    done = runnel(core_only, *args, cwd=tmp_path, **env)
    assert one_error_line(done) + "\n" == shown
