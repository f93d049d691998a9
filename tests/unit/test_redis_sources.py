"""runnel_redis's sources keep their shape: Lua lives in lua/*.lua, each file used by a
script constant, so a script is read and reviewed as Lua, not as a Python string."""

from __future__ import annotations

import ast
from pathlib import Path

import runnel_redis
from runnel_redis import scripts

PACKAGE = Path(runnel_redis.__file__).parent
MODULES = sorted(PACKAGE.glob("*.py"))
LUA = PACKAGE / "lua"


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def test_the_package_is_where_the_tests_look() -> None:
    assert PACKAGE / "scripts.py" in MODULES
    assert len(list(LUA.glob("*.lua"))) > 10


def test_no_module_holds_lua_source() -> None:
    found = [
        f"{path.name}:{node.lineno}"
        for path in MODULES
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and ("redis.call(" in node.value or "redis.pcall(" in node.value)
    ]
    assert found == []


def _loaded_by_constants() -> set[str]:
    """The names given to lua() in scripts.py's module-level CONSTANT = ... lines."""
    names = set()
    for node in _tree(PACKAGE / "scripts.py").body:
        if not isinstance(node, ast.Assign):
            continue
        if not all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets):
            continue
        for call in ast.walk(node.value):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                if call.func.id == "lua" and isinstance(call.args[0], ast.Constant):
                    names.add(call.args[0].value)
    return names


def test_every_lua_file_is_a_script_constant() -> None:
    assert {path.stem for path in LUA.glob("*.lua")} == _loaded_by_constants()


def test_each_file_starts_with_the_comment_that_documents_it() -> None:
    for path in LUA.glob("*.lua"):
        header = path.read_text().split("\n", 1)[0]
        assert header.startswith("-- "), path.name
        # The header stays home: what goes to Redis is the code.
        assert not scripts.lua(path.stem).startswith("--"), path.name


def test_scripts_with_flags_keep_their_flags_line_first() -> None:
    flagged = {name for name in dir(scripts) if name.isupper() and name != "ALLOW_OOM"}
    flagged = {name for name in flagged if getattr(scripts, name).startswith(scripts.ALLOW_OOM)}
    assert flagged == {
        "ACQUIRE",
        "BEAT",
        "HEARTBEAT",
        "EXTEND",
        "CLAIM",
        "TAKE",
        "ANNOUNCE",
        "CHECK_LOCKS",
        "FENCED_READ",
        "ENSURE_GROUP",
    }
    for name in flagged:
        assert "#!" not in scripts.plain(getattr(scripts, name)), name
