"""Redis's refusals turned into Runnel's exceptions where redis-py parses them.

Every reply from every command (pipelines, our packed exchanges and the AUTH sent when a
connection opens) passes through the connection's parser, so translating there covers
them all. The errors keep redis-py's ResponseError as a base, so code that inspects
replies treats them as before; core sees :class:`AccessDenied` or :class:`StoreFull`.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

from redis.asyncio.connection import DefaultParser
from redis.exceptions import ResponseError

from runnel.exceptions import AccessDenied, StoreFull

_COMMAND = re.compile(r"to run the '([^']+)' command")
_AUTH_CODES = ("WRONGPASS", "NOAUTH")


class RedisAccessDenied(AccessDenied, ResponseError):
    """A refusal that retrying cannot fix (credentials or ACL permissions)."""

    def __init__(self, message: str, user: str | None = None, command: str | None = None):
        AccessDenied.__init__(self, message, user, command)


class RedisOutOfMemory(StoreFull, ResponseError):
    """Redis is at ``maxmemory`` with ``noeviction`` and refuses a write."""


def user_of(url: str) -> str:
    """The ACL user a URL logs in as (``default`` when it names none)."""
    try:
        name = urlsplit(url).username
    except ValueError:
        name = None
    return unquote(name) if name else "default"


def translate(response: str, user: str) -> Exception | None:
    """Our exception for an error reply, or None to leave it to redis-py."""
    code = response.split(" ", 1)[0]
    reply = " ".join(response.split())
    if code == "NOAUTH":
        # Redis's own text ("HELLO must be called with the client already authenticated,
        # otherwise the HELLO AUTH ...") names a protocol detail, not what to do about it.
        return RedisAccessDenied(
            f"authentication failed for user '{user}': the server requires a password and "
            "the URL gives none (redis://USER:PASSWORD@HOST:PORT/DB)",
            user,
            "AUTH",
        )
    if code in _AUTH_CODES or response == "ERR invalid password":
        return RedisAccessDenied(f"authentication failed for user '{user}' ({reply})", user, "AUTH")
    if code == "NOPERM" or "can't run this command or subcommand" in response:
        found = _COMMAND.search(response)
        command = found.group(1).upper() if found else "a command"
        where = " from a script" if code != "NOPERM" else ""
        return RedisAccessDenied(
            f"user '{user}' may not run {command}{where} ({reply})", user, command
        )
    if code == "OOM" or "OOM command not allowed" in response:
        return RedisOutOfMemory(f"Redis is out of memory (maxmemory reached): {reply}")
    return None


def parser_class(url: str) -> type[Any]:
    """redis-py's parser, translating refusals for the user ``url`` logs in as."""
    user = user_of(url)

    class Parser(DefaultParser):  # type: ignore[valid-type,misc]
        @classmethod
        def parse_error(cls, response: str) -> Exception:
            return translate(response, user) or super().parse_error(response)

    return Parser
