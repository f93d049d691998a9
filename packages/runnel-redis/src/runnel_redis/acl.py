"""The ``ACL SETUSER`` rules an app needs on Redis (``runnel acl``), kept here because only
this plugin knows which commands Runnel sends and how its keys are named.

The commands are listed by hand, by purpose; tests/unit/test_acl_rules.py reads every Lua
script and every module of this package and fails when one calls a command this list
lacks, and tests/redis_acl/ runs every feature as a user holding exactly these rules.
The key patterns are derived from the key layout itself (:func:`key_patterns`), so a
key kind added there is covered here without a change.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from runnel_redis.layout import KeyLayout, layout_for

if TYPE_CHECKING:
    from runnel.services import Services

COMMANDS: dict[str, tuple[str, ...]] = {
    # Connecting: PING checks a connection, SELECT for a URL naming a database. Not
    # CLIENT SETINFO, by which redis-py names itself on Redis 7.2 and later: unknown to
    # older servers (a rule naming it is refused there), and redis-py ignores a refusal.
    "connection": ("ping", "select"),
    # A Redis Cluster client reads the slot map and the commands' key positions, asks
    # during a slot migration, and reads replicas only after READONLY.
    "cluster": ("cluster|slots", "command", "asking", "readonly"),
    # Lua scripts (lua/*.lua), called by EVALSHA, sent whole by EVAL when the server has
    # not cached them; redis-py's pipelines check and load them with SCRIPT.
    "scripts": ("eval", "evalsha", "script|load", "script|exists"),
    # Transactions (MULTI/EXEC of pipelines, WATCH for check-and-set) and WAIT for replicas.
    "transactions": ("multi", "exec", "discard", "watch", "unwatch", "wait"),
    "keys": ("del", "exists", "type", "pexpire", "pexpireat", "persist", "pttl"),
    # The server's clock, for a job's rate limit (job_admit.lua) and the idempotence
    # window of appends with identities (identities.lua).
    "clock": ("time",),
    "strings": ("get", "set", "mget"),
    "hashes": (
        "hdel",
        "hget",
        "hgetall",
        "hincrby",
        "hlen",
        "hmget",
        "hscan",
        "hset",
        "hsetnx",
    ),
    "lists": ("rpush", "lpop", "lindex", "blpop", "blmove"),
    "sets": ("sadd", "smembers"),
    "sorted sets": (
        "zadd",
        "zcard",
        "zcount",
        "zrange",
        "zrangebyscore",
        "zrem",
        "zremrangebyscore",
        "zrevrange",
    ),
    "streams": (
        "xack",
        "xadd",
        "xautoclaim",
        "xdel",
        "xgroup|create",
        "xgroup|delconsumer",
        "xgroup|setid",
        "xinfo|groups",
        "xinfo|stream",
        "xlen",
        "xpending",
        "xrange",
        "xread",
        "xreadgroup",
        "xrevrange",
        "xtrim",
    ),
}
"""Every command Runnel sends, by purpose; ``command|sub`` allows one subcommand only."""

PASSWORD_PLACEHOLDER = "PASSWORD"
"""What ``runnel acl`` prints instead of a password: the operator puts the real one in."""

SCHEMES = (
    "redis",
    "rediss",
    "unix",
    "redis+embedded",
    "redis+cluster",
    "rediss+cluster",
    "redis+sentinel",
    "rediss+sentinel",
)
"""The URL schemes whose store is this plugin's (see plugin.py)."""

_SAMPLE = "\x00"
"""Stands in for every name but the app's while a key is built, to find where a key's
variable part starts: no Runnel name can hold it unnoticed (it is never encoded)."""
_SAMPLE_NUMBER = 9876543210


def commands() -> list[str]:
    """Every command of :data:`COMMANDS`, each once, in their order."""
    return list(dict.fromkeys(c for group in COMMANDS.values() for c in group))


def key_patterns(layout: KeyLayout, app: str) -> list[str]:
    """The glob patterns matching every key ``layout`` gives ``app``: each key method of
    the layout is called with a sample in place of the names after the app's, and the key
    cut at the first sample (a key without one is matched exactly). Every job key shares
    the jobs prefix, so one pattern covers them all."""
    prefix = layout.jobs_prefix(app)
    found: list[str] = [_escape(prefix) + "*"]
    for name, method in inspect.getmembers(layout, inspect.ismethod):
        if name.startswith("_") or name.endswith("_tag") or name == "jobs_prefix":
            continue
        params = list(inspect.signature(method).parameters)
        if not params or params[0] != "app":
            continue
        samples = [_SAMPLE_NUMBER if p == "number" else _SAMPLE for p in params[1:]]
        key = str(method(app, *samples))
        if key.startswith(prefix):
            continue
        # Cut at the first name after the app's; at the number only for a key of a
        # number alone (the same digits could be part of the app's name).
        if _SAMPLE in key:
            cut = key.find(_SAMPLE)
        else:
            cut = key.rfind(str(_SAMPLE_NUMBER)) if "number" in params else -1
        pattern = _escape(key[:cut]) + "*" if cut >= 0 else _escape(key)
        if pattern not in found:
            found.append(pattern)
    return sorted(found)


def _escape(text: str) -> str:
    """``text`` matched literally by a Redis glob pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def rules(app: Services, user: str, password: bool = True) -> list[str] | None:
    """``ACL SETUSER`` lines giving ``user`` what ``app`` needs, one purpose a line (Redis
    adds each line's rules to the user's): who the user is, the keys, then the commands.
    With ``password``, the first line resets the user and sets the placeholder password;
    without, it keeps the user's passwords and resets only its permissions. None when the
    app's store is not a Redis."""
    url = app.settings.redis_url
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in SCHEMES:
        return None
    layout = layout_for(url, app.settings.redis_key_layout)
    head = f"ACL SETUSER {_quoted(user)}"
    if password:
        first = f"{head} reset on >{PASSWORD_PLACEHOLDER}"
    else:
        first = f"{head} on resetkeys resetchannels -@all"
    lines = [first, head + " " + " ".join(_quoted("~" + p) for p in key_patterns(layout, app.name))]
    for group in COMMANDS.values():
        lines.append(head + " " + " ".join("+" + c for c in group))
    return lines


def _quoted(word: str) -> str:
    """A word as redis-cli reads it: in double quotes if it holds a space or a quote."""
    if not any(c.isspace() or c in "\"'" for c in word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
