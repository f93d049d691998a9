"""The seam between core and redis-py: every store call core makes goes through here.

Two promises hold for each public coroutine method of a class marked :func:`guarded`
(the transport, coordination, leadership, job store and schema store):

* a failure of Redis reaches core as a :class:`~runnel.exceptions.TransportError`
  (:class:`~runnel.exceptions.Unavailable` when Redis is away or slow, and
  :class:`~runnel.exceptions.NotConnected` when it failed while connecting, before any
  command was sent), so core retries those and lets anything else, a bug, surface.
  The error keeps its redis-py class as a base too, so code that catches redis-py's
  exceptions catches it as before;
* a cancellation is never lost. On Python 3.11 redis-py sends each command through
  ``asyncio.wait_for``, which drops a cancellation that arrives just as the reply does,
  and redis-py may report one as a connection error. If the task was cancelled during
  the call (its ``cancelling()`` count rose), the call raises ``CancelledError``
  whatever it returned.

Refusals (credentials, permissions, out of memory) are already turned into
:class:`~runnel.exceptions.AccessDenied` and :class:`~runnel.exceptions.StoreFull` where
replies are parsed (:mod:`runnel_redis.errors`); here they pass through unchanged. The
cluster client takes no parser class: it reports a refused login as its own
``RedisClusterException`` caused by redis-py's ``AuthenticationError``, and a refused
command or a full Redis as redis-py's classes. :func:`refusal` finds those and makes them
the same Runnel errors.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis import connection as redis_connection
from redis import exceptions as redis_errors
from redis.asyncio import connection as redis_async_connection

from runnel.exceptions import (
    AccessDenied,
    GroupMissing,
    NotConnected,
    RunnelError,
    StoreFull,
    TransportError,
    Unavailable,
)
from runnel_redis import errors

C = TypeVar("C", bound=type)

_AWAY: tuple[type[BaseException], ...] = (
    redis_errors.ConnectionError,  # BusyLoadingError (LOADING) is one too
    redis_errors.TimeoutError,
    OSError,
    TimeoutError,
)
"""Failures that say Redis is away or slow, not that it refused what we asked."""

_RESHAPING: tuple[type[BaseException], ...] = (
    redis_errors.ClusterError,  # "TTL exhausted": MOVED/ASK/TRYAGAIN kept coming
    redis_errors.ClusterDownError,
    redis_errors.SlotNotCoveredError,
    redis_errors.TryAgainError,
    redis_errors.AskError,  # MovedError is one too
)
"""A Redis Cluster failing over or moving slots: the same call succeeds again soon."""

_MOMENTARY = ("BUSY", "MASTERDOWN", "TRYAGAIN", "READONLY", "LOADING")
"""Error replies of a server that cannot answer right now (a script running, a failover)."""

_CONNECTION_CODE = {redis_connection.__file__, redis_async_connection.__file__}


def _torn_down(exc: BaseException) -> bool:
    """A connection closed under redis-py while it wrote or read: the stream's attribute
    is gone, and redis-py lets the AttributeError or TypeError out instead of a
    ConnectionError (see redis/redis-py#4287). Seen on a cluster client whose connection
    was disconnected by another task mid-command."""
    if not isinstance(exc, AttributeError | TypeError) or "NoneType" not in str(exc):
        return False
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in _CONNECTION_CODE:
            return True
        tb = tb.tb_next
    return False


_OPENING = {"get_connection", "ensure_connection", "connect", "connect_check_health", "_connect"}
"""redis-py's functions that get a connection ready (it connects inside a call, lazily):
a failure raised through one of them came before the call sent anything."""


def _connecting(exc: BaseException) -> bool:
    """``exc`` was raised while redis-py opened a connection for the call."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name in _OPENING and code.co_filename in _CONNECTION_CODE:
            return True
        tb = tb.tb_next
    return False


def kind_of(exc: BaseException) -> type[TransportError] | None:
    """The Runnel error ``exc`` stands for, or None if it is not a failure of Redis."""
    if isinstance(exc, TransportError):
        return None  # already ours (translated by the parser)
    if isinstance(exc, _AWAY + _RESHAPING) or _torn_down(exc):
        return NotConnected if _connecting(exc) else Unavailable
    if isinstance(exc, redis_errors.RedisClusterException):
        return TransportError  # not a RedisError, though the cluster client raises it
    if isinstance(exc, redis_errors.ResponseError):
        code = _code(exc)
        if code == "NOGROUP":
            return GroupMissing
        return Unavailable if code in _MOMENTARY else TransportError
    if isinstance(exc, redis_errors.RedisError):
        return TransportError
    return None


def _code(exc: redis_errors.ResponseError) -> str:
    """An error reply's code: redis-py takes it off the message of the replies it has a
    class for (READONLY, MASTERDOWN, ...), keeping it as ``status_code``."""
    code = getattr(exc, "status_code", None)
    return code if isinstance(code, str) and code else str(exc).split(" ", 1)[0]


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def refusal(exc: BaseException, user: str) -> Exception | None:
    """The AccessDenied or StoreFull that ``exc`` (or its cause) is, when redis-py did not
    parse it into one: the cluster client's refused login, permissions (also a command a
    script may not run) and full memory. An error Runnel raised on purpose (PartlySent,
    whose cause may be a full master) is left as it is: it says more than its cause."""
    if isinstance(exc, AccessDenied | StoreFull) or (
        isinstance(exc, RunnelError) and not isinstance(exc, TransportError)
    ):
        return None
    for cause in _causes(exc):
        if isinstance(cause, AccessDenied | StoreFull):
            return cause if isinstance(cause, Exception) else None
        if isinstance(cause, redis_errors.AuthenticationError):
            reply = " ".join(str(cause).split())
            return errors.RedisAccessDenied(
                f"authentication failed for user '{user}' ({reply})", user, "AUTH"
            )
        if isinstance(cause, redis_errors.NoPermissionError):
            return errors.translate(f"NOPERM {cause}", user)
        if isinstance(cause, redis_errors.OutOfMemoryError):
            return errors.translate(f"OOM {cause}", user)
        if isinstance(cause, redis_errors.ResponseError):  # e.g. refused inside a script
            found = errors.translate(str(cause), user)
            if found is not None:
                return found
    return None


def _user(store: Any) -> str:
    """The ACL user a store's client logs in as (``default`` when it names none)."""
    client = getattr(store, "redis", None)
    kwargs = getattr(client, "get_connection_kwargs", None)
    found = kwargs().get("username") if callable(kwargs) else None
    return found if isinstance(found, str) and found else "default"


_classes: dict[tuple[type[BaseException], type[TransportError]], type[BaseException]] = {}


def _class(original: type[BaseException], kind: type[TransportError]) -> type[BaseException]:
    key = (original, kind)
    found = _classes.get(key)
    if found is None:
        found = type(original.__name__, (kind, original), {"__module__": original.__module__})
        _classes[key] = found
    return found


def translate(exc: BaseException) -> BaseException:
    """``exc`` as a Runnel transport error that is still an instance of its own class;
    ``exc`` itself if it is not a failure of Redis."""
    kind = kind_of(exc)
    if kind is None:
        return exc
    if _torn_down(exc):
        new: BaseException = kind(f"the connection was lost ({type(exc).__name__}: {exc})")
        new.__cause__ = exc
        return new
    try:
        new = _class(type(exc), kind)(*exc.args)
    except Exception:  # a class whose constructor wants other arguments
        new = kind(str(exc))
    new.__dict__.update(getattr(exc, "__dict__", {}))
    new.__cause__ = exc
    new.__traceback__ = exc.__traceback__
    return new


def _cancelling() -> int:
    task = asyncio.current_task()
    return task.cancelling() if task is not None else 0


def guard(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``method`` with its errors translated and its cancellations kept (see above)."""

    @functools.wraps(method)
    async def call(*args: Any, **kwargs: Any) -> Any:
        before = _cancelling()
        try:
            result = await method(*args, **kwargs)
        except Exception as exc:  # translated below; anything else passes unchanged
            if _cancelling() > before:
                raise asyncio.CancelledError from exc
            refused = refusal(exc, _user(args[0])) if args else None
            if refused is not None:
                raise refused from exc
            new = translate(exc)
            if new is exc:
                raise
            raise new from exc
        if _cancelling() > before:
            raise asyncio.CancelledError  # redis-py dropped it
        return result

    call.__runnel_seam__ = True  # type: ignore[attr-defined]
    return call


def guarded(cls: C) -> C:
    """Mark a store class: guard each public coroutine method it defines."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_") or not inspect.iscoroutinefunction(member):
            continue
        if getattr(member, "__runnel_seam__", False):
            continue
        setattr(cls, name, guard(member))
    return cls
