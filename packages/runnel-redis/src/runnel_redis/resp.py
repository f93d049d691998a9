"""RESP, Redis's wire format, for the commands of the hot path, which we pack ourselves.

redis-py's general packer checks and converts every argument on every call, scripts of a
kilobyte included; a worker sends the same few commands thousands of times a second, so
their constant parts are packed once (:func:`arguments`) and joined to what changes.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError, ResponseError

from runnel_redis import scripts

Arg = bytes | str | int | float


SHORTEST_BLOCK = 0.002
"""The shortest timeout a blocking command is given, in seconds. Not 0.001: Redis 6.2 (the
embedded server's) reads that as 0 ms, which means to block for ever."""


def command(*args: Arg) -> bytes:
    """One whole command."""
    return header(len(args)) + arguments(args)


def header(count: int) -> bytes:
    """The start of a command of ``count`` arguments, to be followed by them."""
    return b"*%d\r\n" % count


def arguments(args: Iterable[Arg]) -> bytes:
    """Arguments packed in a row: part of a command, after its header."""
    out = []
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif not isinstance(arg, bytes):
            arg = _other(arg)
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


def _other(arg: object) -> bytes:
    # As redis-py encodes them: ints in decimal, floats by repr; bools are refused (is
    # True 1, or "True"?), like anything else.
    if isinstance(arg, bool) or not isinstance(arg, int | float | memoryview | bytearray):
        raise TypeError(f"cannot send a {type(arg).__name__} to Redis: {arg!r}")
    if isinstance(arg, int):
        return b"%d" % arg
    if isinstance(arg, float):
        return repr(arg).encode()
    return bytes(arg)


async def exchange(client: aioredis.Redis, packed: bytes, replies: int) -> list[Any]:
    """Send packed commands in one write on one of the client's pooled connections and
    read their ``replies``, an error reply as its exception.

    A connection left in doubt (after an error reply, which may leave it WATCHing keys,
    or a broken or cancelled exchange) is closed rather than handed back as it is.
    """
    pool = client.connection_pool
    conn = await pool.get_connection()
    clean = False
    try:
        await conn.send_packed_command(packed, check_health=False)
        got: list[Any] = []
        for _ in range(replies):
            try:
                got.append(await conn.read_response())
            except ResponseError as exc:
                got.append(exc)
        clean = not any(isinstance(reply, Exception) for reply in got)
        return got
    finally:
        if not clean:
            await conn.disconnect()
        await pool.release(conn)


class Script:
    """A Lua script called by EVALSHA with its constant parts packed once; sent whole
    (EVAL, which also caches it again) if the server no longer knows it."""

    def __init__(self, client: aioredis.Redis, text: str) -> None:
        self.client = client
        self._use(text)

    def _use(self, text: str) -> None:
        self.text = text
        self._evalsha = arguments(("EVALSHA", hashlib.sha1(text.encode()).hexdigest()))
        self._eval = arguments(("EVAL", text))

    async def exchange(
        self, keys: Sequence[Arg], count: int, args: bytes, then: bytes = b"", more: int = 0
    ) -> list[Any]:
        """Call with ``count`` arguments packed already, followed on the same connection
        by ``then`` (``more`` packed commands, a WAIT say); every reply, an error reply as
        its exception. For scripts without flags (see :meth:`packed`)."""
        head = header(3 + len(keys) + count)
        tail = arguments((len(keys), *keys)) + args + then
        replies = await exchange(self.client, head + self._evalsha + tail, 1 + more)
        if isinstance(replies[0], NoScriptError):
            replies = await exchange(self.client, head + self._eval + tail, 1 + more)
        return replies

    def command(self, keys: Sequence[Arg], count: int, args: bytes) -> bytes:
        """The EVALSHA call with ``count`` arguments packed already, to send among other
        commands (a MULTI's: if the server does not know the script, that call alone fails
        with NOSCRIPT, and the caller sends it again through :meth:`packed`)."""
        return header(3 + len(keys) + count) + self._evalsha + arguments((len(keys), *keys)) + args

    async def __call__(self, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        return await self.packed(keys, len(args), arguments(args))

    async def packed(self, keys: Sequence[Arg], count: int, args: bytes) -> Any:
        """Call with ``count`` arguments packed already (:func:`arguments`)."""
        head = header(3 + len(keys) + count)
        tail = arguments((len(keys), *keys)) + args
        [reply] = await exchange(self.client, head + self._evalsha + tail, 1)
        if isinstance(reply, NoScriptError):
            [reply] = await exchange(self.client, head + self._eval + tail, 1)
            if scripts.refuses_flags(reply):  # Redis 6.2: no script flags
                self._use(scripts.plain(self.text))
                [reply] = await exchange(self.client, head + self._eval + tail, 1)
        if isinstance(reply, Exception):
            raise reply
        return reply


def pack_entries(
    entries: Iterable[tuple[str, Mapping[Any, Any]]],
    streams: dict[str, int],
    ids: Sequence[Arg] | None = None,
) -> tuple[bytes, int]:
    """The append scripts' arguments for ``(key, fields)`` entries (lua/append.lua; with
    ``ids``, lua/append_at.lua's, or lua/append_identified.lua's with each entry's mark
    in place of its id), packed, and their number; fills ``streams`` with each
    key's index. Small numbers and field names repeat on every entry, so their packed
    forms are kept."""
    out: list[bytes] = []
    add = out.append
    count = 0
    for n, (key, fields) in enumerate(entries):
        index = streams.get(key)
        if index is None:
            index = streams[key] = len(streams) + 1
        add(_number(index))
        if ids is not None:
            add(arguments((ids[n],)))
            count += 1
        add(_number(len(fields)))
        count += 2 + 2 * len(fields)
        for name, value in fields.items():
            add(_name(name))
            if type(value) is bytes:
                add(b"$%d\r\n%b\r\n" % (len(value), value))
            else:  # str, numbers: as arguments() sends them
                add(arguments((value,)))
    return b"".join(out), count


class Packed(bytes):
    """Arguments packed already (:func:`pairs`): :func:`bulks` passes them on as they are."""


def pairs(mapping: Mapping[bytes, bytes]) -> Packed:
    """A mapping's keys and values as arguments in turn (2 per item), packed in one go."""
    return Packed(
        b"".join(
            [b"$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(k), k, len(v), v) for k, v in mapping.items()]
        )
    )


def bulks(items: Iterable[Arg]) -> bytes:
    """:func:`arguments`, quicker for what most arguments are: bytes and small numbers
    (and :class:`Packed` ones, as they are)."""
    out: list[bytes] = []
    add = out.append
    for item in items:
        if type(item) is bytes:
            add(b"$%d\r\n%b\r\n" % (len(item), item))
        elif type(item) is Packed:
            add(item)
        elif isinstance(item, bytes):
            add(b"$%d\r\n%b\r\n" % (len(item), item))
        elif type(item) is int and 0 <= item < 1_000_000:
            add(_number(item))
        else:
            add(arguments((item,)))
    return b"".join(out)


@functools.cache
def _number(n: int) -> bytes:
    return arguments((n,))


@functools.cache
def _name(name: bytes | str) -> bytes:
    return arguments((name,))
