"""Every Lua script compiles on a real Redis, and Redis names it by the digest the
transport sends with EVALSHA (the sha1 of the text), so a script read from lua/ is
found in the script cache and never sent twice."""

from __future__ import annotations

import hashlib

import pytest
import redis

from runnel_redis import scripts

NAMES = sorted(
    name
    for name in dir(scripts)
    if name.isupper() and name != "ALLOW_OOM" and isinstance(getattr(scripts, name), str)
)


@pytest.mark.parametrize("name", NAMES)
def test_compiles_under_its_digest(redis_client: redis.Redis, name: str) -> None:
    text = getattr(scripts, name)
    digest = redis_client.script_load(text)
    assert digest == hashlib.sha1(text.encode()).hexdigest()
    assert redis_client.script_exists(digest) == [True]
