"""``runnel plugins``: which plugins this process loaded, from where, and what each provides."""

from __future__ import annotations

import json

import click

from runnel.commands import load_plugins, plugin_option
from runnel.plugins.inventory import KINDS, PluginInfo, as_dict, inventory
from runnel.plugins.manager import add_commands

PROVIDING_HOOKS = {f"runnel_{plural}" for plural in KINDS.values()}
"""Hooks whose results show up as provided things; any other hook is listed by name."""


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@plugin_option
@click.pass_context
def plugins(ctx: click.Context, as_json: bool, plugins: tuple[str, ...]) -> None:
    """List every loaded plugin: where it came from and what it provides."""
    load_plugins(plugins)
    root = ctx.find_root().command
    if isinstance(root, click.Group):
        add_commands(root)  # plugins loaded since start-up get their commands counted too
    infos = inventory()
    if as_json:
        click.echo(json.dumps({"plugins": [as_dict(i) for i in infos]}, indent=2))
        return
    for info in infos:
        click.echo(f"{info.name}: {_origin(info)}")
        for line in _details(info):
            click.echo(f"  {line}")


def _origin(info: PluginInfo) -> str:
    if info.source == "entry point":
        return f"entry point {info.entry_point or info.module} ({info.distribution} {info.version})"
    if info.source == "built-in":
        return f"built-in ({info.distribution} {info.version})"
    if info.source == "--plugin":
        return f"--plugin {info.module}"
    return f"{info.source} ({info.module})" if info.module else info.source


def _details(info: PluginInfo) -> list[str]:
    replaced = {(o["kind"], o["name"]): o["by"] for o in info.overridden}
    lines = []
    for kind, plural in KINDS.items():
        names = list(info.provides.get(plural, []))
        names += [name for k, name in replaced if k == kind]
        if not names:
            continue
        shown = []
        for name in sorted(names):
            label = f"{name}://" if kind == "transport" else name
            by = replaced.get((kind, name))
            shown.append(f"{label} (overridden by {by})" if by else label)
        lines.append(f"{plural + ':':13} {', '.join(shown)}")
    other = [h for h in info.hooks if h not in PROVIDING_HOOKS]
    if other:
        lines.append(f"{'other hooks:':13} {', '.join(other)}")
    return lines or ["provides nothing"]
