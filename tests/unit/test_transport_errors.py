"""redis-py's failures become Runnel's transport errors at runnel-redis's seam."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
import redis
from redis import exceptions as redis_errors

from runnel.exceptions import (
    AccessDenied,
    NotConnected,
    RunnelError,
    StoreFull,
    TransportError,
    Unavailable,
)
from runnel.runtime.retry import retrying
from runnel.store.log import PartitionId
from runnel_redis import errors
from runnel_redis.seam import guarded, kind_of, translate
from runnel_redis.transport import RedisTransport
from tests.support.units import UNREACHABLE


def test_the_hierarchy() -> None:
    assert issubclass(Unavailable, TransportError)
    assert issubclass(AccessDenied, TransportError)
    assert issubclass(StoreFull, TransportError)
    assert issubclass(TransportError, RunnelError)


@pytest.mark.parametrize(
    "exc",
    [
        redis_errors.ConnectionError("Connection closed by server."),
        redis_errors.TimeoutError("Timeout reading from socket"),
        redis_errors.BusyLoadingError("Redis is loading the dataset in memory"),
        ConnectionRefusedError(111, "Connection refused"),
        TimeoutError(),
        redis_errors.ResponseError("BUSY Redis is busy running a script"),
        redis_errors.ReadOnlyError("READONLY You can't write against a read only replica."),
    ],
)
def test_away_or_slow_is_unavailable(exc: BaseException) -> None:
    new = translate(exc)
    assert isinstance(new, Unavailable)
    assert isinstance(new, type(exc)), "code catching redis-py's class still catches it"
    assert str(new) == str(exc)
    assert new.__cause__ is exc


@pytest.mark.parametrize(
    "reply",
    [
        "READONLY You can't write against a read only replica. script: 76f9, on @user_script:141.",
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        "BUSY Redis is busy running a script.",
        "LOADING Redis is loading the dataset in memory",
    ],
)
def test_a_reply_of_a_server_failing_over_is_unavailable(reply: str) -> None:
    """As redis-py's parser makes them: it takes the code off the message of the replies
    it has a class for (a demoted master's READONLY among them)."""
    exc = errors.parser_class("redis://x").parse_error(reply)
    assert isinstance(translate(exc), Unavailable), (type(exc), str(exc))


@pytest.mark.parametrize(
    "exc",
    [
        redis_errors.ResponseError("WRONGTYPE Operation against a key holding the wrong kind"),
        redis_errors.NoScriptError("NOSCRIPT No matching script."),
        redis_errors.DataError("Invalid input of type: 'dict'."),
    ],
)
def test_other_redis_failures_are_transport_errors(exc: BaseException) -> None:
    new = translate(exc)
    assert isinstance(new, TransportError) and not isinstance(new, Unavailable)
    assert isinstance(new, type(exc))


@pytest.mark.parametrize("exc", [TypeError("a bug"), KeyError("x"), ValueError("bad reply")])
def test_anything_else_passes_unchanged(exc: BaseException) -> None:
    assert kind_of(exc) is None
    assert translate(exc) is exc


def test_refusals_translated_by_the_parser_pass_unchanged() -> None:
    refused = errors.translate("WRONGPASS invalid username-password pair", "bob")
    full = errors.translate("OOM command not allowed when used memory > 'maxmemory'.", "bob")
    assert isinstance(refused, AccessDenied) and translate(refused) is refused
    assert isinstance(full, StoreFull) and translate(full) is full


@guarded
class Store:
    """A store whose methods fail as redis-py does."""

    def __init__(self, failure: BaseException | None = None) -> None:
        self.failure = failure
        self.calls = 0

    async def call(self) -> str:
        self.calls += 1
        if self.failure is not None:
            raise self.failure
        return "ok"

    async def _private(self) -> None:
        raise redis_errors.ConnectionError("not guarded")


async def test_guarded_methods_translate() -> None:
    assert await Store().call() == "ok"
    with pytest.raises(Unavailable) as caught:
        await Store(redis_errors.ConnectionError("gone")).call()
    assert isinstance(caught.value, redis_errors.ConnectionError)
    with pytest.raises(TypeError):
        await Store(TypeError("a bug")).call()
    with pytest.raises(redis_errors.ConnectionError) as raw:
        await Store()._private()
    assert not isinstance(raw.value, TransportError)


async def test_a_connection_torn_down_under_a_command_is_unavailable(tmp_path: Path) -> None:
    """A real client and server: while a command waits for its reply, another task
    disconnects the client's connections, as the cluster client does when it drops a
    node. redis-py reports that as a ConnectionError (8.2) or lets the missing stream's
    AttributeError or TypeError out (older releases); either way the caller gets
    Unavailable, which core retries, and not NotConnected, since the command was sent."""
    from tests.support.apps import eventually
    from tests.support.gate import Gate
    from tests.support.ports import start_redis

    server = start_redis(tmp_path, persist=False)
    gate = Gate(server.port, cut_at=b"torn-down", mode="hole")
    transport = RedisTransport(gate.url())
    partition = PartitionId("u", "s", 0)
    try:
        assert await transport.lengths([partition]) == {partition: 0}
        call = asyncio.create_task(transport.append([(partition, {b"torn-down": b"1"})]))
        await eventually(lambda: gate.received(b"torn-down"), "the command reached the proxy")
        await transport.redis.connection_pool.disconnect()
        with pytest.raises(Unavailable) as caught:
            await call
        assert not isinstance(caught.value, NotConnected)
    finally:
        gate.close()
        await transport.aclose()


def test_an_attribute_error_outside_redis_py_is_a_bug() -> None:
    """The seam takes a missing stream for a lost connection only inside redis-py's
    connection code: the same error raised anywhere else passes unchanged."""
    assert kind_of(AttributeError("'NoneType' object has no attribute 'write'")) is None


async def test_a_refused_connection_is_unavailable_and_sent_nothing() -> None:
    """A real redis-py client against a port nothing listens on."""
    transport = RedisTransport(UNREACHABLE)
    try:
        with pytest.raises(NotConnected) as caught:
            await transport.lengths([PartitionId("u", "s", 0)])
        assert isinstance(caught.value, Unavailable)
        assert isinstance(caught.value, redis.ConnectionError)
    finally:
        await transport.aclose()


async def test_a_reply_that_times_out_may_follow_a_write(tmp_path: Path) -> None:
    """A real server, paused (SIGSTOP) after the connection is open: the command is
    sent and its reply never comes. That is Unavailable, and not NotConnected: the
    command may have run (a caller such as sendmany must say so)."""
    from tests.support.ports import start_redis

    server = start_redis(tmp_path, persist=False)
    transport = RedisTransport(server.url, socket_timeout=0.5)
    partition = PartitionId("u", "s", 0)
    try:
        assert await transport.lengths([partition]) == {partition: 0}
        os.kill(server.pid, signal.SIGSTOP)
        with pytest.raises(Unavailable) as caught:
            await transport.append([(partition, {b"data": b"1"})])
        assert not isinstance(caught.value, NotConnected)
        assert isinstance(caught.value, redis.TimeoutError)
    finally:
        os.kill(server.pid, signal.SIGCONT)
        await transport.aclose()
        os.kill(server.pid, signal.SIGTERM)


async def test_retrying_retries_transport_errors_only() -> None:
    flaky = Store(redis_errors.ConnectionError("gone"))

    async def call() -> str:
        if flaky.calls == 2:
            flaky.failure = None
        return await flaky.call()

    assert await retrying(call, "testing") == "ok"
    assert flaky.calls == 3

    buggy = Store(TypeError("a bug"))
    with pytest.raises(TypeError):
        await retrying(buggy.call, "testing")
    assert buggy.calls == 1, "a bug is not retried"

    refused = Store(errors.translate("NOPERM no permissions", "bob"))
    with pytest.raises(AccessDenied):
        await retrying(refused.call, "testing")
    assert refused.calls == 1


async def test_a_cancellation_turned_into_an_error_stays_a_cancellation() -> None:
    """redis-py may report a cancellation that interrupted a read as a connection error."""
    started = asyncio.Event()

    @guarded
    class Reporting:
        async def call(self) -> None:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                raise redis_errors.ConnectionError("Connection closed by server.") from None

    task = asyncio.create_task(Reporting().call())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_noauth_is_translated_into_what_to_do() -> None:
    """Redis's NOAUTH reply to HELLO names a protocol detail; the error names the fix (on
    a single server and, through the same function, on a Cluster)."""
    from runnel_redis.errors import translate

    raw = (
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
        "HELLO AUTH <user> <pass> option can be used to authenticate the client"
    )
    found = translate(raw, "default")
    assert isinstance(found, AccessDenied)
    assert str(found) == (
        "authentication failed for user 'default': the server requires a password and the "
        "URL gives none (redis://USER:PASSWORD@HOST:PORT/DB)"
    )
