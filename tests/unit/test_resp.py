"""Our RESP packing says what redis-py's general packer says."""

from __future__ import annotations

import pytest
from redis.connection import Connection

from runnel_redis import resp


@pytest.mark.parametrize(
    "args",
    [
        ("EXEC",),
        ("WATCH", "__lock:a.s.p.0", "__lock:a.s.p.1"),
        ("XREADGROUP", "GROUP", "p", "c", "COUNT", 100, "STREAMS", "k", b"0-0"),
        ("EVAL", "return 'é'\r\n", 0, "ünïcode", b"\x00\xff binary", b"", -7),
        ("SET", "k", b"x" * 100_000),
        ("XADD", "k", "*", "x", 1.5, "y", -0.1, "z", 1e300, "big", 2**70),
    ],
)
def test_packs_as_redis_py_does(args: tuple) -> None:
    assert resp.command(*args) == b"".join(Connection().pack_command(*args))


def test_byte_buffers() -> None:
    assert resp.command("SET", memoryview(b"k"), bytearray(b"v")) == resp.command("SET", "k", "v")


def test_a_command_from_parts() -> None:
    whole = resp.command("EVAL", "script", 2, "k1", "k2", "owner")
    parts = resp.header(6) + resp.arguments(("EVAL", "script")) + resp.arguments((2, "k1"))
    assert parts + resp.arguments(["k2", "owner"]) == whole


@pytest.mark.parametrize("arg", [True, None, 1j, [b"a"]])
def test_other_values_are_refused(arg: object) -> None:
    with pytest.raises(TypeError, match="cannot send"):
        resp.command("SET", "k", arg)  # type: ignore[arg-type]


def test_pairs_packed_ahead_pass_through_bulks_unchanged() -> None:
    # The commit script's table values are packed per table ahead of the other arguments.
    values = {b"k1": b"v1", b'"\xc3\xa9"': b"\x00" * 3}
    assert resp.bulks([b"a", 2, resp.pairs(values), "z"]) == resp.arguments(
        [b"a", 2, *[x for kv in values.items() for x in kv], "z"]
    )
    assert resp.pairs({}) == b""
