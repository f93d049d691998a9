"""``runnel acl``: the rules that give a store user just the access an app needs.

Core knows no store's commands: the plugin of the app's store answers the
``runnel_access_rules`` hook (the Redis plugin prints ``ACL SETUSER`` lines)."""

from __future__ import annotations

import click

from runnel.app import App
from runnel.commands import load, load_plugins, plugin_option
from runnel.urls import redact


@click.command()
@click.argument("target", metavar="MODULE:APP")
@click.option("--user", default="runnel", show_default=True, help="The name of the store's user.")
@click.option(
    "--no-password",
    "keep_password",
    is_flag=True,
    help="Keep the user's passwords: print no PASSWORD placeholder, reset only permissions.",
)
@plugin_option
def acl(target: str, user: str, keep_password: bool, plugins: tuple[str, ...]) -> None:
    """Print the commands that give the store user USER exactly the keys and commands
    the app needs (every feature: streams, processors, tables, jobs, the dashboard, the
    CLI, Spark), one a line, for the store's own client (redis-cli). The password is a
    placeholder, PASSWORD, to replace; a password in the URL is never printed."""
    load_plugins(plugins)
    app = load(target, App)
    from runnel.plugins.manager import plugin_manager

    lines = plugin_manager().hook.runnel_access_rules(
        app=app, user=user, password=not keep_password
    )
    if lines is None:
        url = app.settings.redis_url
        scheme = url.split("://", 1)[0] if "://" in url else url
        if scheme == "memory":
            raise click.ClickException(
                "memory:// has no ACLs: it is a store inside one process, with no users "
                "(runnel acl is for a store such as redis://)"
            )
        raise click.ClickException(
            f"no loaded plugin knows the access rules of {redact(url)} "
            f"(no plugin answers for {scheme}:// stores)"
        )
    for line in lines:
        click.echo(line)
