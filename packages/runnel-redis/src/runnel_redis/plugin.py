"""Registers the Redis transport for its URL schemes, and the ``runnel embedded`` commands."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from runnel.plugins import hookimpl
from runnel_redis.transport import RedisTransport

if TYPE_CHECKING:
    import click

    from runnel.plugins.hookspecs import RegisterTransport
    from runnel.settings import Settings

log = logging.getLogger("runnel.redis")


def _client(url: str, settings: Settings) -> RedisTransport:
    return RedisTransport(url)


def _embedded(url: str, settings: Settings) -> RedisTransport:
    from runnel_redis import embedded

    server = embedded.ensure(url)
    log.info(
        "using the embedded development redis-server at %s (data in %s)", server.url, server.dir
    )
    return RedisTransport(server.url)


@hookimpl
def runnel_transports(register: RegisterTransport) -> None:
    for scheme in ("redis", "rediss", "unix"):
        register(scheme, _client)
    register("redis+embedded", _embedded)


@hookimpl
def runnel_commands(cli: click.Group) -> None:
    from runnel_redis.cli import embedded

    cli.add_command(embedded)
