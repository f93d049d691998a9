"""A Redis user holding exactly the rules `runnel acl` printed (tests/redis_acl)."""

from __future__ import annotations

import shlex
import uuid

import redis

USER = "runnel"


def create_user(admin: redis.Redis | redis.RedisCluster, rules: str) -> str:
    """Run each printed line as redis-cli would, a fresh password in place of the
    placeholder, with ACL LOG emptied after; return the password."""
    password = uuid.uuid4().hex
    for line in rules.splitlines():
        words = shlex.split(line.replace(">PASSWORD", f">{password}"))
        assert words[:3] == ["ACL", "SETUSER", USER], line
        if isinstance(admin, redis.RedisCluster):
            admin.execute_command(*words, target_nodes=redis.RedisCluster.ALL_NODES)
        else:
            admin.execute_command(*words)
    reset_log(admin)
    return password


def reset_log(admin: redis.Redis | redis.RedisCluster) -> None:
    if isinstance(admin, redis.RedisCluster):
        admin.execute_command("ACL", "LOG", "RESET", target_nodes=redis.RedisCluster.ALL_NODES)
    else:
        admin.acl_log_reset()


def denied(admin: redis.Redis | redis.RedisCluster) -> list[dict]:
    """Every ACL LOG entry (of every node of a cluster): what the user was refused."""
    if isinstance(admin, redis.RedisCluster):
        replies = admin.execute_command("ACL", "LOG", target_nodes=redis.RedisCluster.ALL_NODES)
        return [entry for reply in replies.values() for entry in reply]
    return list(admin.acl_log())


def with_user(url: str, password: str) -> str:
    """``url`` (``redis://`` or ``redis+cluster://``, no credentials) as the ACL user."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{USER}:{password}@{rest}"
