"""The process-wide plugin manager and the registry of what plugins provide."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pluggy

from runnel.exceptions import Misconfigured, UnknownPlugin
from runnel.imports import cwd_importable
from runnel.plugins import hookspecs

_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None
_registry: Registry | None = None


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

    def add(self, item: Provided) -> None:
        self.items.setdefault(item.kind, {})[item.name] = item

    def get(self, kind: str, name: str) -> Provided:
        try:
            return self.items.get(kind, {})[name]
        except KeyError:
            known = ", ".join(sorted(self.items.get(kind, {}))) or "none"
            raise UnknownPlugin(
                f"no {kind} named {name!r} is provided by any loaded plugin (known: {known})"
            ) from None

    def names(self, kind: str) -> list[str]:
        return sorted(self.items.get(kind, {}))


def plugin_manager() -> pluggy.PluginManager:
    """The plugin manager, created on first use with built-ins and entry points loaded."""
    global _manager
    with _lock:
        if _manager is None:
            pm = pluggy.PluginManager("runnel")
            pm.add_hookspecs(hookspecs)
            # Built-ins go through the very hooks third parties use; registering them
            # under their entry-point name first makes entry-point loading skip them.
            from runnel.codecs import plugin as codecs

            pm.register(codecs, name="codecs")
            pm.load_setuptools_entrypoints("runnel")
            _manager = pm
        return _manager


def load_plugin(plugin: str | ModuleType | object) -> None:
    """Register one more plugin: a module, an object, or a module's import path."""
    global _registry
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
        _registry = None


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
