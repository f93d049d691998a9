"""What ``runnel plugins`` reports: each loaded plugin, where it came from, what it provides."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runnel import __version__
from runnel.plugins.manager import commands, plugin_manager, registry, source_of

KINDS = {
    "transport": "transports",
    "serializer": "serializers",
    "compressor": "compressors",
    "command": "commands",
}
"""The kinds of things a plugin provides, and their plural as reported."""


@dataclass
class PluginInfo:
    """One loaded plugin, in the shape ``runnel plugins --json`` prints."""

    name: str
    module: str | None
    source: str
    distribution: str | None = None
    version: str | None = None
    entry_point: str | None = None
    provides: dict[str, list[str]] = field(default_factory=dict)
    overridden: list[dict[str, str]] = field(default_factory=list)
    """What it registered that a later plugin replaced: ``{"kind", "name", "by"}``."""
    hooks: list[str] = field(default_factory=list)


def inventory() -> list[PluginInfo]:
    """Every loaded plugin, in the order they were registered (which is the override order)."""
    pm = plugin_manager()
    dists = {id(plugin): dist for plugin, dist in pm.list_plugin_distinfo()}
    infos: dict[str, PluginInfo] = {}
    for name, plugin in pm.list_name_plugin():
        if plugin is None:  # blocked names
            continue
        info = PluginInfo(
            name=name, module=getattr(plugin, "__name__", None), source=source_of(name) or ""
        )
        dist = dists.get(id(plugin))
        if dist is not None:
            info.source = "entry point"
            info.distribution, info.version = dist.project_name, dist.version
            eps = [ep for ep in dist.entry_points if ep.group == "runnel" and ep.name == name]
            info.entry_point = f"{name} = {eps[0].value}" if eps else None
        elif info.source == "built-in":
            info.distribution, info.version = "runnel-core", __version__
        elif not info.source:
            info.source = "registered directly"
        info.hooks = sorted(caller.name for caller in pm.get_hookcallers(plugin) or [])
        infos[name] = info
    _add_provided(infos)
    return list(infos.values())


def distributions() -> list[tuple[str, str]]:
    """Each installed distribution whose plugins were loaded from an entry point (but
    runnel-core, whose plugins are built in), with its version: ``runnel --version``."""
    pm = plugin_manager()
    found = {(dist.project_name, dist.version) for _, dist in pm.list_plugin_distinfo()}
    return sorted(found - {("runnel-core", __version__)})


def _add_provided(infos: dict[str, PluginInfo]) -> None:
    reg, cmds = registry(), commands()
    for source in (reg, cmds):
        for kind, items in source.items.items():
            for item in sorted(items.values(), key=lambda i: i.name):
                if item.plugin in infos:
                    infos[item.plugin].provides.setdefault(KINDS.get(kind, kind), []).append(
                        item.name
                    )
        for old in source.overridden:
            if old.plugin in infos:
                winner = source.items[old.kind][old.name].plugin
                entry = {"kind": old.kind, "name": old.name, "by": winner}
                if entry not in infos[old.plugin].overridden:
                    infos[old.plugin].overridden.append(entry)


def as_dict(info: PluginInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "module": info.module,
        "source": info.source,
        "distribution": info.distribution,
        "version": info.version,
        "entry_point": info.entry_point,
        "provides": {plural: info.provides.get(plural, []) for plural in KINDS.values()},
        "overridden": info.overridden,
        "hooks": info.hooks,
    }
