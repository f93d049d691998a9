"""A Redis user holding exactly the rules `runnel acl` printed (tests/redis_acl), set up
on one server or on every node of a Redis Cluster (ACL users are per node)."""

from __future__ import annotations

import shlex
import uuid

import redis

USER = "runnel"


def create_user(nodes: list[redis.Redis], rules: str) -> str:
    """Run each printed line on each node as redis-cli would, a fresh password in place
    of the placeholder, and empty ACL LOG after; return the password."""
    password = uuid.uuid4().hex
    for line in rules.splitlines():
        words = shlex.split(line.replace(">PASSWORD", f">{password}"))
        assert words[:3] == ["ACL", "SETUSER", USER], line
        for node in nodes:
            node.execute_command(*words)
    for node in nodes:
        node.acl_log_reset()
    return password


def delete_user(nodes: list[redis.Redis]) -> None:
    for node in nodes:
        node.acl_deluser(USER)


def denied(nodes: list[redis.Redis]) -> list[dict]:
    """Every ACL LOG entry of every node: what the user was refused."""
    return [entry for node in nodes for entry in node.acl_log()]


def with_user(url: str, password: str) -> str:
    """``url`` (``redis://`` or ``redis+cluster://``, no credentials) as the ACL user."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{USER}:{password}@{rest}"
