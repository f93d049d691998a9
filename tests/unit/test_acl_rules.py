"""The commands `runnel acl` allows are every command Runnel's code sends: each Lua
script's redis.call/pcall (and the command tables they unpack), each redis-py command
method called on a client or pipeline in runnel_redis, and each command spelled out for
execute_command or packed by hand. A command added to the code and not to
runnel_redis.acl.COMMANDS fails here; the key patterns follow the key layout."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from runnel import App
from runnel.plugins.manager import plugin_manager
from runnel_redis import acl
from runnel_redis.layout import Classic, Cluster, KeyLayout, hash_tag
from tests.support.redis_code import (
    CLIENTS,
    CONTAINERS,
    NOT_COMMANDS,
    NOT_SENT,
    REDIS_COMMANDS,
    RENAMED,
)

PACKAGE = Path(acl.__file__).parent


def allowed() -> set[str]:
    return set(acl.commands())


def lua_commands() -> set[str]:
    """Every command a script names: ``redis.call('X', ...)``, a table ``{'X', ...}``
    unpacked into one, or a helper's command argument (``each(..., 'HSET', key)``)."""
    found: set[str] = set()
    for path in sorted((PACKAGE / "lua").glob("*.lua")):
        code = "\n".join(line.split("--", 1)[0] for line in path.read_text().splitlines())
        for match in re.finditer(r"'([A-Z]+)'(?:\s*,\s*'([A-Z]+)')?", code):
            name, sub = match.group(1).lower(), (match.group(2) or "").lower()
            if name in NOT_COMMANDS or name not in REDIS_COMMANDS:
                continue
            found.add(f"{name}|{sub}" if name in CONTAINERS else name)
    return found


def python_commands() -> set[str]:
    """Every command runnel_redis sends from Python: command methods on clients and
    pipelines, and capitalised command names in string constants (execute_command,
    hand-packed commands, call lists)."""
    found: set[str] = set()
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name in ("embedded.py", "acl.py"):  # its own dev server; the rules
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                method = node.func.attr
                if method in NOT_SENT or not CLIENTS.search(ast.unparse(node.func.value)):
                    continue
                name, _, sub = method.partition("_")
                if name in CONTAINERS:
                    found.add(f"{name}|{sub.replace('_', '')}")
                elif method in RENAMED:
                    found.add(RENAMED[method])
                elif method in REDIS_COMMANDS:
                    found.add(method)
                else:
                    raise AssertionError(f"{path.name}: .{method}() is not a Redis command")
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                words = node.value.split()
                if not words or not all(re.fullmatch(r"[A-Z]+", w) for w in words[:2]):
                    continue
                name = words[0].lower()
                if name in NOT_COMMANDS or name not in REDIS_COMMANDS:
                    continue
                found.add(f"{name}|{words[1].lower()}" if name in CONTAINERS else name)
    return found


def test_the_scripts_call_only_allowed_commands() -> None:
    found = lua_commands()
    assert {"xadd", "xreadgroup", "hset", "xgroup|create", "xinfo|stream"} <= found
    assert sorted(found - allowed()) == []


def test_the_python_code_sends_only_allowed_commands() -> None:
    found = python_commands()
    assert {"evalsha", "eval", "xack", "hgetall", "xgroup|create", "wait"} <= found
    assert sorted(found - allowed()) == []


SENT_BY_REDIS_PY = {
    "ping": "checking a connection",
    "select": "on connecting, for a URL naming a database",
    "script|load": "a registered script the server lacks (Script, pipelines)",
    "script|exists": "a pipeline checking its scripts are loaded",
    "discard": "a transaction given up",
    "unwatch": "a pipeline reset after WATCH",
    "cluster|slots": "a Redis Cluster client reading the slot map",
    "command": "a Redis Cluster client reading where each command's keys are",
    "asking": "a Redis Cluster client during a slot migration",
    "readonly": "a Redis Cluster client reading a replica",
}
"""Commands the rules allow that redis-py sends on Runnel's behalf, not Runnel's code."""


def test_every_allowed_command_is_sent_by_the_code_or_by_redis_py() -> None:
    """The other direction: nothing is allowed that nothing sends."""
    unused = allowed() - lua_commands() - python_commands() - set(SENT_BY_REDIS_PY)
    assert sorted(unused) == []


def test_the_scan_finds_a_command_missing_from_the_rules(monkeypatch) -> None:
    """Taking a command the scripts use off the rules makes the check above fail."""
    monkeypatch.setitem(acl.COMMANDS, "hashes", ("hget",))
    assert "hset" in lua_commands() - allowed()


def test_scripts_are_allowed_with_their_loading_but_no_other_script_command() -> None:
    rules = allowed()
    assert {"eval", "evalsha", "script|load", "script|exists"} <= rules
    assert "script" not in rules and "script|flush" not in rules
    assert not any(c.startswith(("flush", "config", "acl", "keys", "debug")) for c in rules)


def sample_keys(layout: KeyLayout, app: str) -> list[str]:
    """One key of every kind the layout names, for a stream, processor, table, job."""
    return [
        layout.partition(app, "orders", 3),
        layout.lost(app, "orders", 3),
        layout.table(app, "orders", "totals", 3),
        layout.deadlines(app, "orders", "totals", 3),
        layout.table_counts(app),
        layout.outbox(app, "orders", 3),
        layout.relayed(app, "orders", 3),
        layout.membership(app, "orders", "count"),
        layout.control(app, "orders", "count"),
        layout.partition_lock(app, "orders", "count", 3),
        layout.admin_lock(app, "orders", "count"),
        layout.heartbeat(app, "orders", "count", "vm:1:ab"),
        layout.quarantine(app, "orders", "count"),
        layout.leader(app),
        layout.schemas(app, "orders"),
        layout.job_queue(app),
        layout.job_queue(app, "critical"),
        layout.job_schedule(app, "critical"),
        layout.job_dead(app),
        layout.job_queues(app),
        layout.job_results_index(app),
        layout.job_executors(app),
        layout.job_ticks(app),
        layout.job_totals(app),
        layout.job(app, "j1"),
        layout.job_result(app, "j1"),
        layout.job_beat(app, "vm:1:ab"),
        layout.job_cancelled_index(app),
        layout.job_notices(app, "vm:1:ab"),
    ]


def glob(pattern: str) -> re.Pattern[str]:
    """A Redis glob pattern (``*``, ``?``, backslash escapes) as a regular expression."""
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 1
            out += re.escape(pattern[i])
        elif c == "*":
            out += ".*"
        elif c == "?":
            out += "."
        else:
            out += re.escape(c)
        i += 1
    return re.compile(out, re.S)


@pytest.mark.parametrize("layout", [Classic(), Cluster()], ids=lambda x: x.name)
@pytest.mark.parametrize("app", ["shop", "my.shop*[1]", "n9876543210"])
def test_every_key_of_the_app_matches_a_pattern_and_no_other_apps_do(
    layout: KeyLayout, app: str
) -> None:
    patterns = [glob(p) for p in acl.key_patterns(layout, app)]
    for key in sample_keys(layout, app):
        assert any(p.fullmatch(key) for p in patterns), key
    for key in sample_keys(layout, "other"):
        assert not any(p.fullmatch(key) for p in patterns), key
    if layout.name == "cluster":  # tags escape the dots: a longer name is another app
        for key in sample_keys(layout, app + ".x"):
            assert not any(p.fullmatch(key) for p in patterns), (key, hash_tag(key))


def test_the_hook_answers_for_redis_urls_only() -> None:
    hook = plugin_manager().hook.runnel_access_rules
    redis_app = App(name="shop", redis_url="redis://u:secret@localhost:1/0")
    lines = hook(app=redis_app, user="runnel", password=True)
    assert lines[0] == "ACL SETUSER runnel reset on >PASSWORD"
    assert not any("secret" in line for line in lines)
    kept = hook(app=redis_app, user="ops team", password=False)
    assert kept[0] == 'ACL SETUSER "ops team" on resetkeys resetchannels -@all'
    assert hook(app=App(name="shop", redis_url="memory://"), user="runnel", password=True) is None
