"""Redis behind Sentinel (``redis+sentinel://``, ``rediss+sentinel://``): the URL, and
clients that ask the sentinels where the master is whenever they open a connection.

The URL (docs/high-availability.md)::

    redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/SERVICE[/DB][?OPTIONS]

The user and password are the data nodes' (the master's and its replicas'), as in a
``redis://`` URL; the sentinels' own credentials, when they have any, are the
``sentinel_username`` and ``sentinel_password`` options. ``rediss+sentinel://`` speaks TLS
to the sentinels and to the data nodes alike.

A failover needs no restart: the old master closes its clients' connections (or refuses
their writes with READONLY, or is gone), the call fails as Runnel's ``Unavailable`` and is
retried by whoever made it, and the next connection the pool opens asks the sentinels
for the new master's address (redis-py's ``SentinelConnectionPool``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import redis
import redis.asyncio as aioredis
from redis.asyncio.sentinel import MasterNotFoundError as AsyncMasterNotFound
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.asyncio.sentinel import SentinelConnectionPool as AsyncSentinelPool
from redis.exceptions import ConnectionError, ResponseError, TimeoutError
from redis.sentinel import MasterNotFoundError, Sentinel

from runnel.exceptions import AccessDenied, Misconfigured
from runnel.urls import redact
from runnel_redis import errors, pool

SCHEMES = ("redis+sentinel", "rediss+sentinel")
DEFAULT_PORT = 26379
"""Sentinel's own port, for a host named without one."""

FORM = "redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/SERVICE[/DB]"

_NUMBERS = ("socket_timeout", "socket_connect_timeout")
_TLS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs", "ssl_check_hostname")
_CERT_REQS = ("none", "optional", "required")
OPTIONS = ("sentinel_username", "sentinel_password", *_NUMBERS, *_TLS)
"""The query options a sentinel URL may carry (the ``ssl_`` ones with TLS only)."""


def is_sentinel(url: str) -> bool:
    return url.split("://", 1)[0].lower() in SCHEMES


@dataclass(frozen=True)
class Target:
    """What a sentinel URL names: where to ask, for what, and how to log in."""

    sentinels: list[tuple[str, int]]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    sentinel_username: str | None = None
    sentinel_password: str | None = field(default=None, repr=False)
    tls: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    """Socket timeouts and TLS settings, for the sentinels and the data nodes alike."""

    def node_options(self) -> dict[str, Any]:
        """How to connect to the master (its address comes from the sentinels)."""
        found = {"db": self.db, "username": self.username, "password": self.password}
        return {**found, **self.options, **({"ssl": True} if self.tls else {})}

    def sentinel_options(self) -> dict[str, Any]:
        """How to connect to a sentinel."""
        found = {"username": self.sentinel_username, "password": self.sentinel_password}
        return {**found, **self.options, **({"ssl": True} if self.tls else {})}


def parse(url: str) -> Target:
    """The target of a sentinel URL; :class:`Misconfigured` naming what is wrong (with the
    URL's passwords hidden) when it is not one."""

    def bad(why: str) -> Misconfigured:
        return Misconfigured(f"redis_url {shown(url)!r}: {why} (write it as {FORM})")

    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise bad(f"not a sentinel URL ({', '.join(s + '://' for s in SCHEMES)})")
    try:
        parts = urlsplit("x://" + rest)
    except ValueError as exc:  # an unclosed [ of an IPv6 address
        raise bad(str(exc)) from None
    if parts.fragment:
        raise bad("a sentinel URL takes no #fragment")
    userinfo, at, hosts = parts.netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
        if not colon and username:
            password, username = username, None  # redis://SECRET@host: a password alone
    if not hosts:
        raise bad("no host: name the sentinels, HOST:PORT,HOST:PORT,...")
    sentinels = [_address(item, bad) for item in hosts.split(",")]
    path = [unquote(p) for p in parts.path.split("/")[1:]]
    if path and path[-1] == "":
        path.pop()  # a trailing slash
    if not path or not path[0]:
        raise bad("no service name (the master's name the sentinels monitor)")
    if len(path) > 2:
        raise bad(f"too many path parts ({parts.path!r})")
    db = 0
    if len(path) == 2:
        if not path[1].isdigit():
            raise bad(f"the database must be a number, not {path[1]!r}")
        db = int(path[1])
    options: dict[str, Any] = {}
    named: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if name not in OPTIONS:
            raise bad(f"unknown option {name!r} (known: {', '.join(OPTIONS)})")
        if name in named or name in options:
            raise bad(f"option {name!r} given twice")
        if name in _TLS and scheme != "rediss+sentinel":
            raise bad(f"option {name!r} needs TLS (rediss+sentinel://)")
        if name in _NUMBERS:
            options[name] = _seconds(name, value, bad)
        elif name == "ssl_check_hostname":
            options[name] = _flag(name, value, bad)
        elif name == "ssl_cert_reqs":
            if value.lower() not in _CERT_REQS:
                raise bad(f"ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}")
            options[name] = value.lower()
        elif name in _TLS:
            options[name] = value
        else:
            named[name] = value
    return Target(
        sentinels=sentinels,
        service=path[0],
        db=db,
        username=username,
        password=password,
        sentinel_username=named.get("sentinel_username") or None,
        sentinel_password=named.get("sentinel_password"),
        tls=scheme == "rediss+sentinel",
        options=options,
    )


def shown(url: str) -> str:
    """``url`` as an error may show it: passwords hidden, and the value of any option but
    the known ones too (a misspelt ``sentinel_password`` still holds a password)."""
    head, mark, query = redact(url).partition("?")
    if not mark:
        return head
    items = []
    for item in query.split("&"):
        name, equals, value = item.partition("=")
        keep = name in OPTIONS or not equals or value == "***"
        items.append(item if keep else f"{name}=***")
    return f"{head}?{'&'.join(items)}"


def _address(item: str, bad: Any) -> tuple[str, int]:
    """``HOST[:PORT]`` or ``[IPV6][:PORT]``."""
    if not item:
        raise bad("an empty host in the list of sentinels")
    if item.startswith("["):
        host, close, tail = item[1:].partition("]")
        if not close or (tail and not tail.startswith(":")):
            raise bad(f"a bad address {item!r}")
        port_text = tail[1:] if tail else ""
    else:
        host, _, port_text = item.partition(":")
    if not host:
        raise bad(f"no host in {item!r}")
    if not port_text:
        return host, DEFAULT_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise bad(f"the port of {item!r} is not a port number")
    return host, int(port_text)


def _seconds(name: str, value: str, bad: Any) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise bad(f"{name} must be a number of seconds above 0, not {value!r}")
    return seconds


def _flag(name: str, value: str, bad: Any) -> bool:
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise bad(f"{name} must be true or false, not {value!r}")


def _refused(sentinel: Any, exc: AccessDenied) -> AccessDenied:
    """A sentinel's refusal, saying which credentials it was given."""
    kwargs = sentinel.connection_pool.connection_kwargs
    where = f"{kwargs.get('host')}:{kwargs.get('port')}"
    return errors.RedisAccessDenied(
        f"sentinel {where} refused the login: {exc} (the sentinels' credentials are the "
        "URL's sentinel_username and sentinel_password options)",
        exc.user,
        exc.command,
    )


def _master(service: str, state: Any) -> str | None:
    """Why a sentinel's view of ``service`` gives no master (None: it gives one)."""
    if not state:
        return f"monitors no service {service!r}"
    if not state["is_master"] or state["is_sdown"] or state["is_odown"]:
        return f"sees the master of {service!r} down"
    return None


def _where(sentinel: Any) -> str:
    kwargs = sentinel.connection_pool.connection_kwargs
    return f"{kwargs.get('host')}:{kwargs.get('port')}"


class _AsyncSentinels(AsyncSentinel):
    """redis-py's sentinel manager, except that sentinels which all refuse our login
    raise :class:`AccessDenied` (retrying cannot help) instead of "no master found"."""

    def __init__(self, target: Target) -> None:
        super().__init__(target.sentinels, sentinel_kwargs=target.sentinel_options())
        # The sentinels' refusals as Runnel's, naming the sentinel user (the client
        # takes no parser of its own: its pool's connections do).
        parser = errors.parser_class(f"redis://{target.sentinel_username or 'default'}@x")
        for sentinel in self.sentinels:
            sentinel.connection_pool.connection_kwargs["parser_class"] = parser

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        problems: list[str] = []
        refused: list[AccessDenied] = []
        for index, sentinel in enumerate(self.sentinels):
            try:
                masters: Any = await sentinel.sentinel_masters()
            except AccessDenied as exc:
                refused.append(_refused(sentinel, exc))
                continue
            except (ConnectionError, ResponseError, TimeoutError, OSError) as exc:
                problems.append(f"{_where(sentinel)}: {type(exc).__name__}: {exc}")
                continue
            state: Any = masters.get(service_name)
            why = _master(service_name, state)
            if why is None:
                self.sentinels.insert(0, self.sentinels.pop(index))  # asked first next time
                return state["ip"], int(state["port"])
            problems.append(f"{_where(sentinel)} {why}")
        if refused and not problems:
            raise refused[0]
        problems += [str(r) for r in refused]
        raise AsyncMasterNotFound(f"no master found for {service_name!r}: {'; '.join(problems)}")


class _Sentinels(Sentinel):
    """redis-py's synchronous sentinel manager, naming what each sentinel said when none
    gives a master (the partition logs of runnel-spark)."""

    def discover_master(self, service_name: str) -> tuple[str, int]:
        problems: list[str] = []
        for index, sentinel in enumerate(self.sentinels):
            try:
                masters: Any = sentinel.sentinel_masters()
            except (ConnectionError, ResponseError, TimeoutError, OSError) as exc:
                problems.append(f"{_where(sentinel)}: {type(exc).__name__}: {exc}")
                continue
            state: Any = masters.get(service_name)
            why = _master(service_name, state)
            if why is None:
                self.sentinels.insert(0, self.sentinels.pop(index))
                return state["ip"], int(state["port"])
            problems.append(f"{_where(sentinel)} {why}")
        raise MasterNotFoundError(f"no master found for {service_name!r}: {'; '.join(problems)}")


class WaitingSentinelPool(pool.Waiting, AsyncSentinelPool):
    """The master's pool: calls wait for a free connection (runnel_redis.pool), and
    closing it closes the connections to the sentinels too."""

    async def aclose(self) -> None:
        try:
            await super().aclose()
        finally:
            await self.sentinel_manager.aclose()


def async_client(url: str, max_connections: int, **options: Any) -> aioredis.Redis:
    """An asyncio client of the master ``url`` names, whose calls wait for one of
    ``max_connections`` connections; ``options`` are the data nodes' connections'."""
    target = parse(url)
    return _AsyncSentinels(target).master_for(
        target.service,
        connection_pool_class=WaitingSentinelPool,
        max_connections=max_connections,
        **{**target.node_options(), **options},
    )


def sync_client(url: str, **options: Any) -> redis.Redis:
    """A synchronous client of the master ``url`` names (the partition logs'); close it
    with :func:`close`."""
    target = parse(url)
    manager = _Sentinels(target.sentinels, sentinel_kwargs=target.sentinel_options())
    return manager.master_for(target.service, **{**target.node_options(), **options})


def close(client: redis.Redis) -> None:
    """Close a :func:`sync_client`: its connections to the master and to the sentinels."""
    client.close()
    client.connection_pool.sentinel_manager.close()  # type: ignore[attr-defined]
