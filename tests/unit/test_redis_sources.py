"""runnel_redis's sources keep their shape: Lua lives in lua/*.lua, each file used by a
script constant, so a script is read and reviewed as Lua, not as a Python string; and its
modules import each other without cycles, all at the top (but in the entry points, which
defer them, and the one import named in DEFERRED), so that the order they load in never
matters and no import inside a function hides a cycle."""

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


def _imports(path: Path) -> list[tuple[str, bool, int]]:
    """(runnel_redis module imported, whether inside a function or class, line) per import."""
    tree = _tree(path)
    nested = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        for inner in ast.walk(node)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            parts = ["runnel_redis"] if node.level else []  # from . import x, from .x import y
            parts += node.module.split(".") if node.module else []
            if parts[:1] != ["runnel_redis"]:
                continue
            if len(parts) > 1:
                names = [parts[1]]
            else:
                names = [
                    a.name if (PACKAGE / f"{a.name}.py").exists() else "__init__"
                    for a in node.names
                ]
        elif isinstance(node, ast.Import):
            dotted = [a.name.split(".") for a in node.names]
            names = [[*d, "__init__"][1] for d in dotted if d[0] == "runnel_redis"]
        else:
            continue
        found += [(name, id(node) in nested, node.lineno) for name in names]
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of the graph as the modules along it, or [] when it has none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return []
        path.append(module)
        for target in sorted(graph.get(module, ())):
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        done.add(module)
        return []

    for module in sorted(graph):
        cycle = visit(module)
        if cycle:
            return cycle
    return []


def test_the_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_modules_import_each_other_without_a_cycle() -> None:
    # Every import counts, at the top or not: one inside a function may not hide a cycle.
    graph = {path.stem: {name for name, _, _ in _imports(path)} for path in MODULES}
    assert graph["cluster"] >= {"cluster_log", "transport"}  # the finder sees the imports
    assert _cycle(graph) == []


ENTRY_POINTS = {"__init__.py", "plugin.py"}
"""What every `runnel` command imports (the package, and the plugin its entry point names):
these import the transports inside the functions that use them, so that `runnel --help`
does not wait for redis-py (tests/unit/test_cli_lazy.py). The cycle test above still sees
those imports."""


DEFERRED = {("transport.py", "jobs")}
"""The one import inside a function elsewhere: the transport's job store, with the job
models, imported when an app first uses its job queue (a worker of streams never does;
tests/unit/test_start_imports.py). The cycle test above sees it like any other."""


def test_no_module_imports_runnel_redis_inside_a_function() -> None:
    inside = [
        f"{path.name}:{line} imports {name}"
        for path in MODULES
        if path.name not in ENTRY_POINTS
        for name, nested, line in _imports(path)
        if nested and (path.name, name) not in DEFERRED
    ]
    assert inside == []
    transport = [(n, nested) for n, nested, _ in _imports(PACKAGE / "transport.py")]
    assert ("jobs", True) in transport  # the exception still names a real import
