"""The process-wide plugin manager and the registry of what plugins provide."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

import pluggy

from runnel.exceptions import Misconfigured, UnknownPlugin
from runnel.imports import cwd_importable
from runnel.plugins import hookspecs
from runnel.plugins.providers import install_hint

if TYPE_CHECKING:
    import click

Source = Literal["built-in", "entry point", "--plugin", "App(plugins=...)", "load_plugin()"]
"""How a plugin came to be loaded (what ``runnel plugins`` reports)."""

_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None
_registry: Registry | None = None
_sources: dict[str, Source] = {}
_commands: Registry | None = None
_commands_added: set[tuple[int, str]] = set()
generation = 0
"""Counts the plugins registered after start-up, so caches of their hooks know to look again."""


@dataclass
class Provided:
    """One named thing a plugin registered."""

    kind: str
    name: str
    factory: Callable[..., Any]
    plugin: str


@dataclass
class Registry:
    """Everything the loaded plugins provide, by kind and name."""

    items: dict[str, dict[str, Provided]] = field(default_factory=dict)
    overridden: list[Provided] = field(default_factory=list)
    """Registrations replaced by another plugin's under the same name, oldest first."""

    def add(self, item: Provided) -> None:
        by_name = self.items.setdefault(item.kind, {})
        previous = by_name.get(item.name)
        if previous is not None and previous.plugin != item.plugin:
            self.overridden.append(previous)
        by_name[item.name] = item

    def get(self, kind: str, name: str) -> Provided:
        try:
            return self.items.get(kind, {})[name]
        except KeyError:
            known = ", ".join(sorted(self.items.get(kind, {}))) or "none"
            hint = install_hint(kind, name)
            raise UnknownPlugin(
                f"no {kind} named {name!r} is provided by any loaded plugin (known: {known})"
                + (f"; {hint}" if hint else "")
            ) from None

    def names(self, kind: str) -> list[str]:
        return sorted(self.items.get(kind, {}))


BUILT_IN = {"codecs": "runnel.codecs.plugin", "memory": "runnel.memory.plugin"}
"""The plugins runnel-core ships, by their entry-point names: loaded by name like any
other, so that the manager knows no plugin's module."""


def plugin_manager() -> pluggy.PluginManager:
    """The plugin manager, created on first use with built-ins and entry points loaded."""
    global _manager
    with _lock:
        if _manager is None:
            pm = pluggy.PluginManager("runnel")
            pm.add_hookspecs(hookspecs)
            # Built-ins go through the very hooks third parties use; registering them
            # under their entry-point name first makes entry-point loading skip them.
            for name, module in BUILT_IN.items():
                pm.register(importlib.import_module(module), name=name)
                _sources[name] = "built-in"
            try:
                pm.load_setuptools_entrypoints("runnel")
            except Exception as exc:  # a plugin's own code failed to import
                raise Misconfigured(_broken_entry_point(exc)) from exc
            _manager = pm
        return _manager


def load_plugin(plugin: str | ModuleType | object, source: Source = "load_plugin()") -> None:
    """Register one more plugin: a module, an object, or a module's import path.

    ``source`` only records where the request came from, for ``runnel plugins``.
    """
    global _registry, generation
    pm = plugin_manager()
    if isinstance(plugin, str):
        cwd_importable()
        try:
            plugin = importlib.import_module(plugin)
        except ImportError as exc:
            raise Misconfigured(f"cannot import plugin module {plugin!r}: {exc}") from exc
    if pm.is_registered(plugin):
        return
    name = getattr(plugin, "__name__", None) or repr(plugin)
    if pm.get_plugin(name) is not None:
        # Another object under the same name (two classes called Plugin, say).
        name = f"{name}@{id(plugin):x}"
    pm.register(plugin, name=name)
    with _lock:
        _sources[name] = source
        _registry = None
        generation += 1


def registry() -> Registry:
    """What every loaded plugin provides; rebuilt when a plugin is added."""
    global _registry
    pm = plugin_manager()
    with _lock:
        if _registry is not None:
            return _registry
        reg = Registry()
        for kind, hook in (
            ("transport", pm.hook.runnel_transports),
            ("serializer", pm.hook.runnel_serializers),
            ("compressor", pm.hook.runnel_compressors),
        ):
            # Oldest registration first, so later plugins can override a name.
            for impl in hook.get_hookimpls():
                impl.function(register=_recorder(reg, kind, impl.plugin_name))
        _registry = reg
        return reg


def _recorder(reg: Registry, kind: str, plugin: str) -> Callable[[str, Callable[..., Any]], None]:
    def register(name: str, factory: Callable[..., Any]) -> None:
        reg.add(Provided(kind=kind, name=name, factory=factory, plugin=plugin))

    return register


def plugin_names() -> list[str]:
    pm = plugin_manager()
    return sorted(pm.get_name(p) or repr(p) for p in pm.get_plugins())


def source_of(name: str) -> Source | None:
    """Built-in, ``--plugin`` and so on; ``None`` for entry points and direct registrations."""
    return _sources.get(name)


def add_commands(cli: click.Group) -> None:
    """Call each plugin's ``runnel_commands`` once, noting which commands it added.

    Plugins are called oldest first, like the registry's hooks, so a later plugin's
    command replaces an earlier one of the same name. Plugins already called for this
    group are skipped, so this can run again after more plugins were loaded.
    """
    global _commands
    pm = plugin_manager()
    for impl in pm.hook.runnel_commands.get_hookimpls():
        key = (id(cli), impl.plugin_name)
        if key in _commands_added:
            continue
        _commands_added.add(key)
        before = _command_tree(cli)
        impl.function(cli=cli)
        after = _command_tree(cli)
        changed = [path for path, cmd in after.items() if before.get(path) is not cmd]
        if _commands is None:
            _commands = Registry()
        for path in changed:
            # A new group brings its sub-commands along: name only the group.
            if not any(path.startswith(other + " ") for other in changed):
                _commands.add(Provided("command", path, after[path], impl.plugin_name))


def commands() -> Registry:
    """The commands plugins added through :func:`add_commands` (kind ``"command"``)."""
    return _commands or Registry()


def _command_tree(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    import click

    tree: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        tree[prefix + name] = command
        if isinstance(command, click.Group):
            tree.update(_command_tree(command, f"{prefix}{name} "))
    return tree


def _broken_entry_point(exc: Exception) -> str:
    """Name the installed plugin that failed to load, and why, in one line."""
    from importlib.metadata import entry_points

    for ep in entry_points(group="runnel"):
        try:
            ep.load()
        except Exception as failure:  # find which plugin fails to import
            dist = f" (distribution {ep.dist.name} {ep.dist.version})" if ep.dist else ""
            reason = " ".join(f"{type(failure).__name__}: {failure}".split())
            return f"installed plugin {ep.name!r}{dist} failed to load: {reason}"
    return f"loading installed plugins failed: {exc!r}"
