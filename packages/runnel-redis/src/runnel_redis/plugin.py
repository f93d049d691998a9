"""Registers the Redis transport for its URL schemes, the ``runnel embedded`` commands, and
the ACL rules ``runnel acl`` prints."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from runnel.plugins import hookimpl
from runnel_redis import acl, embedded
from runnel_redis.cli import embedded as embedded_commands
from runnel_redis.cluster import RedisClusterTransport
from runnel_redis.layout import CLUSTER_SCHEMES, layout_for
from runnel_redis.transport import RedisTransport

if TYPE_CHECKING:
    import click

    from runnel.plugins.hookspecs import RegisterTransport
    from runnel.services import Services
    from runnel.settings import Settings

log = logging.getLogger("runnel.redis")


def _options(url: str, settings: Settings) -> dict[str, Any]:
    return {
        "layout": layout_for(url, settings.redis_key_layout),
        "wait_replicas": settings.wait_replicas,
        "wait_timeout": settings.wait_timeout,
        "max_connections": settings.redis_max_connections,
    }


def _client(url: str, settings: Settings) -> RedisTransport:
    return RedisTransport(url, **_options(url, settings))


def _cluster(url: str, settings: Settings) -> RedisTransport:
    return RedisClusterTransport(url, **_options(url, settings))


def _embedded(url: str, settings: Settings) -> RedisTransport:
    server = embedded.ensure(url)
    log.info(
        "using the embedded development redis-server at %s (data in %s)", server.url, server.dir
    )
    return RedisTransport(server.url, **_options(server.url, settings))


@hookimpl
def runnel_transports(register: RegisterTransport) -> None:
    for scheme in ("redis", "rediss", "unix"):
        register(scheme, _client)
    register("redis+embedded", _embedded)
    for scheme in CLUSTER_SCHEMES:
        register(scheme, _cluster)


@hookimpl
def runnel_commands(cli: click.Group) -> None:
    cli.add_command(embedded_commands)


@hookimpl
def runnel_access_rules(app: Services, user: str, password: bool) -> list[str] | None:
    return acl.rules(app, user, password)
