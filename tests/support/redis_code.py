"""The Redis commands runnel-redis's code runs, read from its source (no server): per Lua
script, per script constant of runnel_redis/scripts.py, and per method of a class,
following the calls it makes into the package. The same reading as the ACL's check
(tests/unit/test_acl_rules.py), narrowed to one operation, for the docs' tables."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import redis

from runnel_redis import acl

PACKAGE = Path(acl.__file__).parent

CONTAINERS = {"xgroup", "xinfo", "script", "client", "cluster", "config", "object", "memory"}
CONTAINERS.add("acl")
"""Commands whose first argument is a subcommand, allowed one by one (``xgroup|create``)."""

NOT_COMMANDS = {"readonly", "busy", "loading", "masterdown", "tryagain", "noperm", "oom"}
NOT_COMMANDS.add("auth")
"""Capitalised words the code holds that are error replies it recognises, not commands
it sends (READONLY is also a command, sent by the cluster client itself), and AUTH, which
Redis lets every user send."""

CLIENTS = re.compile(r"(^|\.)(_?redis|_?client|_?cluster|pipe)$")
"""The receivers of command methods in runnel_redis: clients and pipelines."""

NOT_SENT = {"aclose", "close", "execute", "execute_command", "initialize", "pipeline"}
NOT_SENT |= {"register_script", "multi", "get_node_from_key"}  # MULTI goes with EXEC

RENAMED = {"delete": "del", "xpending_range": "xpending"}
"""redis-py methods named otherwise than the command they send."""

SCRIPTING = {"eval", "evalsha", "script|load", "script|exists"}
"""How a script is sent, not what it runs: a doc says "Lua" and names the script's own
commands."""


def _server_commands() -> set[str]:
    """What a capitalised word must be to count as a command: a name redis-py has a
    method for, a container of subcommands, or one of those redis-py sends only itself."""
    names = {m for m in dir(redis.Redis) if not m.startswith("_") and m.isalpha()}
    # DEL too: redis-py's method for it is delete(), so a script's 'DEL' was missed.
    return names | CONTAINERS | {"eval", "evalsha", "exec", "multi", "wait", "asking", "del"}


REDIS_COMMANDS = _server_commands()


def command_of(words: list[str]) -> str | None:
    """The command a text starts with (``XGROUP CREATE ... 0`` -> ``xgroup|create``):
    None unless its first word is a Redis command in capitals."""
    if not words or not re.fullmatch(r"[A-Z]+", words[0]):
        return None
    name = words[0].lower()
    if name in NOT_COMMANDS or name not in REDIS_COMMANDS:
        return None
    if name in CONTAINERS:
        return f"{name}|{words[1].lower()}" if len(words) > 1 else name
    return name


@cache
def lua_file_commands(name: str) -> frozenset[str]:
    """Every command ``lua/NAME.lua`` names: ``redis.call('X', ...)``, a table
    ``{'X', ...}`` unpacked into one, or a helper's command argument."""
    path = PACKAGE / "lua" / f"{name}.lua"
    code = "\n".join(line.split("--", 1)[0] for line in path.read_text().splitlines())
    found: set[str] = set()
    for match in re.finditer(r"'([A-Z]+)'(?:\s*,\s*'([A-Z]+)')?", code):
        command = command_of([match.group(1), match.group(2) or ""])
        if command is not None:
            found.add(command)
    return frozenset(found)


@cache
def script_files() -> dict[str, tuple[str, ...]]:
    """Each script constant of scripts.py and the lua files it is made of, in order."""
    tree = ast.parse((PACKAGE / "scripts.py").read_text())
    out: dict[str, tuple[str, ...]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            files = tuple(
                call.args[0].value
                for call in ast.walk(node.value)
                if isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id == "lua"
                and isinstance(call.args[0], ast.Constant)
            )
            if files:
                out[node.targets[0].id] = files
    return out


def script_commands(constant: str) -> set[str]:
    return set().union(*(lua_file_commands(f) for f in script_files()[constant]))


class Code:
    """runnel-redis's modules, read once; :meth:`commands` of a method."""

    def __init__(self) -> None:
        self.classes: dict[str, tuple[str, ast.ClassDef]] = {}
        self.functions: dict[str, dict[str, ast.AST]] = {}
        self.constants: dict[str, dict[str, ast.AST]] = {}
        self.imported: dict[str, dict[str, str]] = {}
        for path in sorted(PACKAGE.glob("*.py")):
            if path.name in ("embedded.py", "acl.py"):
                continue
            module = path.stem
            tree = ast.parse(path.read_text())
            self.functions[module], self.constants[module], self.imported[module] = {}, {}, {}
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    self.classes[node.name] = (module, node)
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    self.functions[module][node.name] = node
                elif isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            self.constants[module][target.id] = node.value
                elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "runnel_redis."
                ):
                    for alias in node.names:
                        self.imported[module][alias.asname or alias.name] = node.module.split(".")[
                            1
                        ]

    def _lineage(self, name: str) -> list[str]:
        """The class and its bases within the package, nearest first."""
        out, todo = [], [name]
        while todo:
            current = todo.pop(0)
            if current in self.classes and current not in out:
                out.append(current)
                todo += [ast.unparse(b) for b in self.classes[current][1].bases]
        return out

    def _method(self, cls: str, name: str) -> tuple[str, ast.AST] | None:
        for owner in self._lineage(cls):
            for node in self.classes[owner][1].body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                    return owner, node
        return None

    def _attribute_values(self, cls: str, name: str) -> list[ast.AST]:
        """What ``self.NAME`` is set to anywhere in the class and its bases."""
        values = []
        for owner in self._lineage(cls):
            for node in ast.walk(self.classes[owner][1]):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if (
                            isinstance(target, ast.Attribute)
                            and target.attr == name
                            and ast.unparse(target.value) == "self"
                        ):
                            values.append(node.value)
        return values

    def has(self, cls: str, method: str) -> bool:
        """Whether the class (or a base of it in the package) defines the method."""
        return self._method(cls, method) is not None

    def commands(self, cls: str, method: str) -> set[str]:
        """Every command ``cls.method`` runs, itself or through what it calls in the
        package (methods, module functions, script constants, packed command words); the
        sending of scripts (:data:`SCRIPTING`) left out."""
        found = self._method(cls, method)
        assert found is not None, f"{cls}.{method} not found"
        owner, node = found
        seen: set[int] = set()
        return self._walk(node, cls, self.classes[owner][0], seen) - SCRIPTING

    def _walk(
        self, root: ast.AST, cls: str | None, module: str, seen: set[int], shallow: bool = False
    ) -> set[str]:
        """The commands under ``root``; ``shallow``: those of constants and scripts only,
        following no call."""
        if id(root) in seen:
            return set()
        seen.add(id(root))
        found: set[str] = set()
        for node in ast.walk(root):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                words = node.value.split()[:2]
                # A command packed by hand or given to execute_command, not a docstring.
                if all(re.fullmatch(r"[A-Z]+", w) for w in words):
                    command = command_of(words)
                    if command is not None:
                        found.add(command)
            elif isinstance(node, ast.Attribute):
                receiver = ast.unparse(node.value)
                if receiver == "scripts" and node.attr in script_files():
                    found |= script_commands(node.attr)
                elif receiver == "self" and cls is not None and not shallow:
                    target = self._method(cls, node.attr)
                    if target is not None:
                        found |= self._walk(target[1], cls, self.classes[target[0]][0], seen)
                    # What the attribute holds (a script, packed command words), not the
                    # calls that made it (a client's set-up runs no command of this one).
                    for value in self._attribute_values(cls, node.attr):
                        found |= self._walk(value, cls, module, seen, shallow=True)
            elif isinstance(node, ast.Name):
                found |= self._name(node.id, cls, module, seen, shallow)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not shallow:
                found |= _client_call(node)
        return found

    def _name(
        self, name: str, cls: str | None, module: str, seen: set[int], shallow: bool
    ) -> set[str]:
        """What a bare name reached from ``module`` runs: a module constant, a module
        function, or one imported from another module of the package."""
        where = self.imported[module].get(name, module)
        if where not in self.functions:
            return set()
        value = self.constants[where].get(name)
        if value is None and not shallow:
            value = self.functions[where].get(name)
        if value is None:
            return set()
        return self._walk(value, None, where, seen, shallow)


def _client_call(node: ast.Call) -> set[str]:
    """The command a method call on a client or pipeline sends (a transaction's pipeline:
    MULTI and EXEC)."""
    assert isinstance(node.func, ast.Attribute)
    method = node.func.attr
    if not CLIENTS.search(ast.unparse(node.func.value)):
        return set()
    if method == "pipeline":
        transaction = next((k.value for k in node.keywords if k.arg == "transaction"), None)
        plain = isinstance(transaction, ast.Constant) and transaction.value is False
        return set() if plain else {"multi", "exec"}
    if method in NOT_SENT:
        return set()
    name, _, sub = method.partition("_")
    if name in CONTAINERS:
        return {f"{name}|{sub.replace('_', '')}"}
    if method in RENAMED:
        return {RENAMED[method]}
    return {method} if method in REDIS_COMMANDS else set()
