"""Third-party plugins for real: the installed example plugin (found only through its entry
point), a module loaded with ``--plugin``, and ``runnel plugins`` listing them all.

``tests/plugins/runnel-example-plugin`` is installed for the test run only, in this
process and those the tests start (tests/support/example_plugin.py);
``tests/plugins/local_plugin.py`` is not installed anywhere.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
import redis

from runnel import App, Record
from runnel.runtime.worker import Worker
from tests.support.cli_app import MODULE, Project, jsonl, pings, write_app
from tests.support.processes import WorkerProcess, wait_for

PLUGINS_DIR = Path(__file__).resolve().parents[1] / "plugins"
EXAMPLE_VERSION = "0.1.0"
MARKER = b"TJ1 "  # what every tagged-json value starts with


def runnel_script(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The installed `runnel` console script (next to this interpreter), not `python -m`."""
    script = Path(sys.executable).parent / "runnel"
    assert script.exists(), f"no runnel console script next to {sys.executable}"
    return subprocess.run(
        [str(script), *args],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("RUNNEL_")}
    return {**env, **extra}


def with_local_plugin(env: dict[str, str]) -> dict[str, str]:
    """``local_plugin`` importable, the way a developer's own module would be."""
    path = os.pathsep.join(p for p in (str(PLUGINS_DIR), env.get("PYTHONPATH")) if p)
    return {**env, "PYTHONPATH": path}


def listing(*args: str, cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``runnel plugins --json``, by plugin name."""
    done = runnel_script("plugins", "--json", *args, cwd=cwd, env=env)
    assert done.returncode == 0, done.stderr
    return {p["name"]: p for p in json.loads(done.stdout)["plugins"]}


def assert_one_line_error(done: subprocess.CompletedProcess[str], *names: str) -> None:
    err = done.stderr.strip()
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert err.startswith("Error: "), done.stderr
    assert "\n" not in err, f"more than one line on stderr:\n{done.stderr}"
    for name in names:
        assert name in err, f"{name!r} not named in: {err}"


def unpack(raw: bytes) -> dict[str, Any]:
    """A stored ``tagged-json+example-zlib`` value, taken apart without Runnel."""
    plain = zlib.decompress(raw)
    assert plain.startswith(MARKER), plain
    return json.loads(plain[len(MARKER) :])


# --- runnel plugins ---------------------------------------------------------------------------


def test_plugins_lists_builtins_installed_plugins_and_what_they_provide(tmp_path: Path) -> None:
    done = runnel_script("plugins", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    blocks = {}
    for line in done.stdout.splitlines():
        if not line.startswith(" "):
            name, _, origin = line.partition(": ")
            blocks[name] = [origin]
        else:
            blocks[name].append(line.strip())
    assert blocks["codecs"][0].startswith("built-in (runnel-core ")
    codecs = " ".join(blocks["codecs"])
    assert "json" in codecs and "msgpack" in codecs and "gzip" in codecs
    assert blocks["redis"][0] == "entry point redis = runnel_redis.plugin (runnel-redis 0.2.0.dev0)"
    transports = next(line for line in blocks["redis"] if line.startswith("transports:"))
    listed = transports.removeprefix("transports:").strip().split(", ")
    assert {"redis://", "rediss://", "unix://", "redis+embedded://"} <= set(listed), transports
    commands = next(line for line in blocks["redis"] if line.startswith("commands:"))
    assert "embedded" in commands.removeprefix("commands:").strip().split(", "), commands
    assert "(runnel-avro 0.2.0.dev0)" in blocks["avro"][0]
    assert "(runnel-spark 0.2.0.dev0)" in blocks["spark"][0]
    assert blocks["example"] == [
        f"entry point example = runnel_example_plugin.plugin "
        f"(runnel-example-plugin {EXAMPLE_VERSION})",
        "serializers:  tagged-json",
        "compressors:  example-zlib",
        "commands:     example-hello",
    ]
    # Registration order: built-ins first, so anything else may override their names.
    assert next(iter(blocks)) == "codecs"


def test_plugins_json(tmp_path: Path) -> None:
    plugins = listing(cwd=tmp_path)
    codecs = plugins["codecs"]
    assert codecs["source"] == "built-in"
    assert codecs["distribution"] == "runnel-core"
    assert {"json", "msgpack"} <= set(codecs["provides"]["serializers"])
    assert "gzip" in codecs["provides"]["compressors"]
    redis_plugin = plugins["redis"]
    assert redis_plugin["source"] == "entry point"
    assert redis_plugin["distribution"] == "runnel-redis"
    assert {"redis", "rediss", "unix", "redis+embedded"} <= set(
        redis_plugin["provides"]["transports"]
    )
    assert redis_plugin["provides"]["commands"] == ["embedded"]
    assert {"runnel_transports", "runnel_commands"} <= set(redis_plugin["hooks"])
    for name, dist in (("avro", "runnel-avro"), ("spark", "runnel-spark")):
        assert plugins[name]["source"] == "entry point"
        assert plugins[name]["distribution"] == dist
    assert plugins["example"] == {
        "name": "example",
        "module": "runnel_example_plugin.plugin",
        "source": "entry point",
        "distribution": "runnel-example-plugin",
        "version": EXAMPLE_VERSION,
        "entry_point": "example = runnel_example_plugin.plugin",
        "provides": {
            "transports": [],
            "serializers": ["tagged-json"],
            "compressors": ["example-zlib"],
            "commands": ["example-hello"],
        },
        "overridden": [],
        "hooks": ["runnel_commands", "runnel_compressors", "runnel_serializers"],
    }
    assert "local_plugin" not in plugins


@pytest.mark.parametrize("where", ["after", "before"])
def test_plugin_option_lists_a_module_that_is_not_installed(tmp_path: Path, where: str) -> None:
    env = with_local_plugin(clean_env())
    args = ["--plugin", "local_plugin"]
    command = ["plugins", *args] if where == "after" else [*args, "plugins"]
    done = runnel_script(*command, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "local_plugin: --plugin local_plugin\n" in done.stdout
    assert "  serializers:  upper-json\n  commands:     local-hello\n" in done.stdout
    assert "example: entry point" in done.stdout  # the installed ones are still there

    local = listing(*args, cwd=tmp_path, env=env)["local_plugin"]
    assert local["source"] == "--plugin"
    assert local["module"] == "local_plugin"
    assert local["distribution"] is None
    assert local["provides"]["serializers"] == ["upper-json"]
    assert local["provides"]["commands"] == ["local-hello"]


def test_plugin_option_finds_a_module_in_the_current_directory(tmp_path: Path) -> None:
    shutil.copy(PLUGINS_DIR / "local_plugin.py", tmp_path)
    done = runnel_script("--plugin", "local_plugin", "local-hello", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello from local_plugin\n"
    # Without --plugin nothing knows about it.
    done = runnel_script("local-hello", cwd=tmp_path)
    assert done.returncode == 2
    assert "No such command 'local-hello'" in done.stderr


@pytest.mark.parametrize(
    "args",
    [["plugins", "--plugin", "not_a_module"], ["--plugin", "not_a_module", "plugins"]],
    ids=["after", "before"],
)
def test_unknown_plugin_module_is_one_error_line(tmp_path: Path, args: list[str]) -> None:
    done = runnel_script(*args, cwd=tmp_path)
    assert_one_line_error(done, "not_a_module")
    assert done.stdout == ""


def test_entry_point_command_runs_from_the_console_script(tmp_path: Path) -> None:
    done = runnel_script("example-hello", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"hello world from runnel-example-plugin {EXAMPLE_VERSION}\n"
    done = runnel_script("example-hello", "ada", cwd=tmp_path)
    assert done.stdout == f"hello ada from runnel-example-plugin {EXAMPLE_VERSION}\n"
    done = runnel_script("--help", cwd=tmp_path)
    assert "\n  example-hello " in done.stdout.split("Commands:", 1)[1]


# --- the example plugin's codecs against a real Redis ----------------------------------------


class Order(Record):
    id: int
    customer: str
    total: float


async def test_example_codecs_in_process(redis_url: str, app_name: str) -> None:
    app = App(name=app_name, redis_url=redis_url, default_join_delay=0, default_read_timeout=100)
    orders = app.stream(
        "orders", record=Order, partition_by="id", serializer="tagged-json+example-zlib"
    )
    sent = [Order(id=i, customer=f"c{i % 3}", total=i * 1.5) for i in range(30)]
    received: list[Order] = []
    done = asyncio.Event()

    @app.processor(orders)
    async def collect(events):
        async for order in events.records():
            received.append(order)
            if len(received) == len(sent):
                done.set()

    await orders.send(*sent)
    worker = Worker(app)
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(30):
            await done.wait()
    finally:
        worker.stop()
        assert await task == 0
    assert sorted(received, key=lambda o: o.id) == sent

    # What Redis holds is the plugin's format: zlib around "TJ1 " + JSON.
    client = redis.Redis.from_url(redis_url)
    try:
        stored = [
            unpack(fields[b"data"])
            for partition in orders.partitions
            for _, fields in client.xrange(partition.key)
        ]
    finally:
        client.close()
    assert sorted(stored, key=lambda d: d["id"]) == [o.model_dump(mode="json") for o in sent]


SERIALIZED_APP = ', default_serializer="tagged-json+example-zlib"'


def test_example_codecs_through_the_command_line(
    tmp_path: Path, app_name: str, redis_url: str, redis_client: redis.Redis
) -> None:
    """`runnel sendmany` and `runnel worker` resolve the names from the entry point alone."""
    write_app(tmp_path, app_name, app_kwargs=SERIALIZED_APP)
    project = Project(dir=tmp_path, app_name=app_name, redis_url=redis_url, client=redis_client)
    events = pings(40, keys=4)
    done = project.run("sendmany", f"{MODULE}:pings", "-", input=jsonl(events))
    assert done.returncode == 0, done.stderr
    stored = [
        unpack(fields[b"data"])
        for key in project.partition_keys()
        for _, fields in redis_client.xrange(key)
    ]
    assert sorted(stored, key=lambda e: e["n"]) == events

    with WorkerProcess(f"{MODULE}:app", tmp_path, project.env, "--processors", "a") as worker:
        wait_for(lambda: len(project.seen("a")) >= len(events))
        assert worker.stop() == 0, worker.output
    assert sorted(project.seen("a")) == sorted(f"{e['key']}:{e['n']}" for e in events)


def test_plugin_option_serializer_is_used_by_send_and_worker(
    tmp_path: Path, app_name: str, redis_url: str, redis_client: redis.Redis
) -> None:
    """A serializer from a module that is only named with --plugin, on every command."""
    write_app(tmp_path, app_name, app_kwargs=', default_serializer="upper-json"')
    project = Project(dir=tmp_path, app_name=app_name, redis_url=redis_url, client=redis_client)
    env = with_local_plugin(project.env)
    plugin = ("--plugin", "local_plugin")
    done = project.run("send", f"{MODULE}:pings", '{"key": "abc", "n": 1}', *plugin, env=env)
    assert done.returncode == 0, done.stderr
    [raw] = [f[b"data"] for k in project.partition_keys() for _, f in redis_client.xrange(k)]
    assert json.loads(raw) == {"key": "ABC", "n": 1}

    with WorkerProcess(f"{MODULE}:app", tmp_path, env, "--processors", "a", *plugin) as worker:
        wait_for(lambda: project.seen("a"))
        assert worker.stop() == 0, worker.output
    assert project.seen("a") == ["ABC:1"]

    # Without the plugin the app cannot even be declared.
    done = project.run("send", f"{MODULE}:pings", '{"key": "x", "n": 2}', env=env)
    assert_one_line_error(done, "upper-json")


def test_a_broken_installed_plugin_is_named_in_one_error_line(tmp_path: Path) -> None:
    """An installed distribution whose `runnel` entry point cannot be imported: every
    command says which plugin (and distribution) is broken, in one line, exit 1."""
    site = tmp_path / "site"
    info = site / "runnel_broken_plugin-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: runnel-broken-plugin\nVersion: 1.2.3\n"
    )
    (info / "entry_points.txt").write_text("[runnel]\nbroken = runnel_broken_plugin_missing\n")
    env = clean_env(PYTHONPATH=str(site))
    for args in (["plugins"], ["--version"]):
        done = runnel_script(*args, cwd=tmp_path, env=env)
        assert_one_line_error(done, "broken", "runnel-broken-plugin 1.2.3")
