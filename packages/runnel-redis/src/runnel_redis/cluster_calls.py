"""Calling Lua scripts and pipelines on a Redis Cluster: each script routed by its keys
(all of one slot), sent by hash first and by text only to a node that does not know it
yet, and pipelines grouped by node, with or without a ``WAIT`` for replicas."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Any

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import NoScriptError


class ClusterScript:
    """A Lua script on a cluster: EVALSHA routed by its keys (all of one slot), EVAL
    when that node does not know it yet (each master has its own script cache)."""

    def __init__(self, client: RedisCluster, text: str) -> None:
        self.client = client
        self.text = text
        self.sha = sha(text)

    async def __call__(self, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        try:
            return await self.client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await self.client.execute_command("EVAL", self.text, len(keys), *keys, *args)

    def queue(self, pipe: Any, keys: Sequence[Any], args: Sequence[Any]) -> None:
        """Add a call to a pipeline (as EVAL: a pipeline cannot retry a NOSCRIPT alone)."""
        pipe.execute_command("EVAL", self.text, len(keys), *keys, *args)


async def pipelined(client: RedisCluster, calls: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Run commands as one pipeline (grouped by node, nodes in parallel); replies in
    order, an error reply as its exception.

    Scripts (:func:`eval_call`) go as ``EVALSHA``; the ones a node does not know yet come
    back ``NOSCRIPT`` without having run, and are sent again as ``EVAL`` (which leaves
    the script in that node's cache), so the text crosses the network once per node."""
    if not calls:
        return []
    replies = await pipeline(client, [by_sha(call) for call in calls])
    again = [n for n, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if again:
        for n, reply in zip(again, await pipeline(client, [calls[n] for n in again]), strict=True):
            replies[n] = reply
    return replies


async def pipeline(client: RedisCluster, calls: Sequence[tuple[Any, ...]]) -> list[Any]:
    """A call may end with a dict of options for redis-py (``target_nodes``)."""
    async with client.pipeline() as pipe:
        for call in calls:
            if call and isinstance(call[-1], dict):
                pipe.execute_command(*call[:-1], **call[-1])
            else:
                pipe.execute_command(*call)
        return list(await pipe.execute(raise_on_error=False))


@functools.cache
def pairs(flat: Sequence[Any]) -> dict[Any, Any]:
    """A flat reply (field, value, field, value, ...) as a dict."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def eval_call(text: str, keys: Sequence[Any], args: Sequence[Any]) -> tuple[Any, ...]:
    return ("EVAL", text, len(keys), *keys, *args)


def by_sha(call: tuple[Any, ...]) -> tuple[Any, ...]:
    """An ``EVAL`` call as ``EVALSHA``; any other command as it is."""
    if call[0] != "EVAL":
        return call
    return ("EVALSHA", sha(call[1]), *call[2:])


async def then_wait(
    client: RedisCluster,
    node: ClusterNode,
    calls: Sequence[tuple[Any, ...]],
    replicas: int,
    timeout_ms: int,
) -> tuple[list[Any], int]:
    """Writes on one master, then ``WAIT`` in the same pipeline (so on the connection that
    wrote: WAIT counts the replicas holding that connection's writes). The replies, and
    how many replicas acknowledged (the fewer of the two rounds when scripts the node did
    not know had to be sent again)."""

    async def attempt(batch: Sequence[tuple[Any, ...]]) -> tuple[list[Any], int]:
        async with client.pipeline() as pipe:
            for call in batch:
                pipe.execute_command(*call, target_nodes=node)
            pipe.execute_command("WAIT", replicas, timeout_ms, target_nodes=node)
            got = list(await pipe.execute(raise_on_error=False))
        wait = got.pop()
        return got, wait if isinstance(wait, int) else 0

    replies, acked = await attempt([by_sha(call) for call in calls])
    again = [n for n, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if again:
        retried, acked_again = await attempt([calls[n] for n in again])
        for n, reply in zip(again, retried, strict=True):
            replies[n] = reply
        acked = min(acked, acked_again)
    return replies, acked


def raise_first(replies: Sequence[Any]) -> None:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
