"""Routing: the default hasher, key -> partition, and its stability across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from hashlib import md5

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runnel import App, Record
from runnel.hashing import default_hasher, md5_hasher

# Computed once with hashlib: int(md5(repr(key).encode("utf-8")).hexdigest(), 16), and % 16.
# These literals are the contract with data already in Redis: never regenerate them.
KNOWN = [
    (0, 276215275525073243129443018166533317850, 10),
    (1, 261578874264819908609102035485573088411, 11),
    (-1, 143173006762304773268596533316791315592, 8),
    (42, 215089739385482443301854222253501995174, 6),
    (2**64, 140898573286476955519231396028866957626, 10),
    ("", 307039354401608507995592152675605671786, 10),
    ("a", 288490239198635612013461292210345105655, 7),
    ("user-1", 272235715336786137642485158656613960301, 13),
    ("é", 260683353164218768474426373937403924949, 5),
    ("日本", 257654817989831383120524113519936165314, 2),
    ("🚀", 220400981736276395389237853812936056983, 7),
    ((1, 2), 177578387790999811033711218036213421478, 6),
    (("a", 1), 154767159505710982162657364648526051945, 9),
    ((), 251019984476128906241024862864356612812, 12),
    (None, 142059132063289656026104991475001407316, 4),
    (0.1, 270305162769684482365313465668387217525, 5),
    (1.5, 127649463280257087104661810174744981706, 10),
    (-0.0, 308445621760034693899010597836524648121, 9),
    (float("inf"), 316996924228407285747630941238473268781, 13),
    (True, 329855246551566222814775335744623139444, 4),
    (b"x", 306520450742033096150620879493603003493, 5),
]


class Click(Record, primitive=True):
    user: str
    n: int


class Keyed(Record):
    key: int
    label: str


@pytest.mark.parametrize(("key", "expected", "_partition"), KNOWN, ids=[repr(k[0]) for k in KNOWN])
def test_default_hasher_is_md5_of_repr(key, expected, _partition):
    assert default_hasher is md5_hasher
    assert md5_hasher(key) == expected


@pytest.mark.parametrize(("key", "_hash", "partition"), KNOWN, ids=[repr(k[0]) for k in KNOWN])
def test_known_keys_route_to_known_partitions(key, _hash, partition):
    app = App(name="u", redis_url="redis://127.0.0.1:1")

    class AnyKey(Record):
        k: object = None

    stream = app.stream("anykey", record=AnyKey, partition_by=lambda r: key, partition_count=16)
    assert stream.partition_number(AnyKey()) == partition


def test_stream_uses_the_default_hasher(app):
    stream = app.stream("clicks", record=Click, partition_by="user")
    assert stream.hasher is md5_hasher
    assert stream.partition_count == 16


def test_routes_by_partition_by_field(app):
    stream = app.stream("clicks", record=Click, partition_by="user", partition_count=16)
    for user, _hash, partition in KNOWN:
        if isinstance(user, str):
            record = Click(user=user, n=999)
            assert stream.key_of(record) == user
            assert stream.partition_number(record) == partition
    # The other fields do not matter.
    assert stream.partition_number(Click(user="a", n=1)) == stream.partition_number(
        Click(user="a", n=2)
    )


def test_routes_by_callable(app):
    stream = app.stream(
        "clicks", record=Click, partition_by=lambda r: (r.user, r.n), partition_count=16
    )
    assert stream.key_of(Click(user="a", n=1)) == ("a", 1)
    assert stream.partition_number(Click(user="a", n=1)) == 9  # the ("a", 1) row of KNOWN
    assert stream.partition_number(Click(user="zz", n=1)) == md5_hasher(("zz", 1)) % 16


def test_routes_non_primitive_record_by_int_field(app):
    stream = app.stream("keyed", record=Keyed, partition_by="key", partition_count=16)
    assert [stream.partition_number(Keyed(key=k, label="x")) for k in (0, 1, -1, 42)] == [
        10,
        11,
        8,
        6,
    ]


def test_custom_hasher_and_partition_count(app):
    stream = app.stream(
        "keyed", record=Keyed, partition_by="key", partition_count=5, hasher=lambda k: k * 2
    )
    assert [stream.partition_number(Keyed(key=k, label="")) for k in range(6)] == [0, 2, 4, 1, 3, 0]


def test_partition_by_must_name_a_field(app):
    from runnel.exceptions import Misconfigured

    with pytest.raises(Misconfigured, match="nope"):
        app.stream("keyed", record=Keyed, partition_by="nope")


keys = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(),
    lambda children: st.tuples(children, children) | st.lists(children, max_size=3).map(tuple),
    max_leaves=8,
)


@settings(deadline=None)
@given(key=keys, partition_count=st.integers(min_value=1, max_value=10_000))
def test_routing_always_lands_in_range(key, partition_count):
    app = App(name="u", redis_url="redis://127.0.0.1:1")

    class AnyKey(Record):
        k: object = None

    stream = app.stream(
        "anykey", record=AnyKey, partition_by=lambda r: key, partition_count=partition_count
    )
    n = stream.partition_number(AnyKey())
    assert 0 <= n < partition_count
    assert n == int(md5(repr(key).encode("utf-8")).hexdigest(), 16) % partition_count


_CHILD = """
import json
from runnel import App, Record
from runnel.hashing import default_hasher

class Click(Record, primitive=True):
    user: str
    n: int

app = App(name="u", redis_url="redis://127.0.0.1:1")
stream = app.stream("clicks", record=Click, partition_by="user", partition_count=16)
keys = [0, 1, -1, 42, "", "a", "user-1", "é", "日本", (1, 2), ("a", 1), None, 0.1, 1.5]
users = ["", "a", "user-1", "é", "日本", "🚀"]
print(json.dumps({
    "hashes": [str(default_hasher(k)) for k in keys],
    "partitions": [stream.partition_number(Click(user=u, n=0)) for u in users],
    "builtin_hash": hash("a"),
}))
"""


def _run_child(seed: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("RUNNEL_")}
    env["PYTHONHASHSEED"] = seed
    out = subprocess.run(
        [sys.executable, "-c", _CHILD],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def test_stable_whatever_pythonhashseed():
    first, second = _run_child("1"), _run_child("4242")
    # The seeds did take effect: Python's own str hash differs between the two processes...
    assert first["builtin_hash"] != second["builtin_hash"]
    # ...but routing does not.
    assert first["hashes"] == second["hashes"]
    assert first["partitions"] == second["partitions"]
    table = {repr(k): h for k, h, _ in KNOWN}
    child_keys = [0, 1, -1, 42, "", "a", "user-1", "é", "日本", (1, 2), ("a", 1), None, 0.1, 1.5]
    assert first["hashes"] == [str(table[repr(k)]) for k in child_keys]
    assert first["partitions"] == [10, 7, 13, 5, 2, 7]


# hasher="xxhash": runnel 0.1's fast hasher (its ``runnel[fast]`` bundle). 0.1 computed
# ``xxh64(repr(key)).intdigest()`` with xxhash 1.x, which takes a str as its UTF-8 bytes,
# seed 0; the partition is that unsigned 64-bit integer % partition_count.

XXH64_KNOWN = [
    # Computed once with the xxhash package; like KNOWN, never regenerate them.
    (0, 7148434200721666028, 12),
    (1, 13237225503670494420, 4),
    (42, 7919287270473417401, 9),
    ("a", 11568505001935109382, 6),
    ("user-1", 6778258323800457946, 10),
    ("日本", 1760672865539618027, 11),
    ((1, 2), 16048885061049210570, 10),
    (None, 4387124778405518223, 15),
    (b"x", 13083312752785219286, 6),
]


def _xxh64_of_repr(key) -> int:
    """The documented formula, straight from the xxhash package."""
    import xxhash

    return xxhash.xxh64(repr(key).encode("utf-8"), seed=0).intdigest()


def test_xxhash_package_is_xxh64():
    import xxhash

    # XXH64 of no bytes with seed 0, from the xxHash specification's test vectors.
    assert xxhash.xxh64_intdigest(b"") == 0xEF46DB3751D8E999


@pytest.mark.parametrize(("key", "expected", "partition"), XXH64_KNOWN)
def test_xxhash_hasher_is_xxh64_of_repr(app, key, expected, partition):
    from runnel.hashing import resolve_hasher

    hasher = resolve_hasher("xxhash")
    assert hasher(key) == expected == _xxh64_of_repr(key)

    class AnyKey(Record):
        k: object = None

    stream = app.stream(
        "anykey", record=AnyKey, partition_by=lambda r: key, partition_count=16, hasher="xxhash"
    )
    assert stream.partition_number(AnyKey()) == partition
    assert stream.hash(key) == partition


@settings(deadline=None)
@given(key=keys, partition_count=st.integers(min_value=1, max_value=10_000))
def test_xxhash_routing_matches_the_formula(key, partition_count):
    app = App(name="u", redis_url="redis://127.0.0.1:1")
    stream = app.stream(
        "clicks",
        record=Click,
        partition_by="user",
        partition_count=partition_count,
        hasher="xxhash",
    )
    assert stream.hash(key) == _xxh64_of_repr(key) % partition_count


def test_xxhash_as_the_default_hasher_setting(monkeypatch):
    plain = App(name="u", redis_url="redis://127.0.0.1:1")
    assert plain.settings.default_hasher is md5_hasher  # installed, yet never the default
    fast = App(name="u", redis_url="redis://127.0.0.1:1", default_hasher="xxhash")
    stream = fast.stream("clicks", record=Click, partition_by="user", partition_count=16)
    assert stream.partition_number(Click(user="user-1", n=0)) == 10
    monkeypatch.setenv("RUNNEL_DEFAULT_HASHER", "xxhash")
    from_env = App(name="u", redis_url="redis://127.0.0.1:1")
    assert from_env.settings.default_hasher(42) == 7919287270473417401
    # "md5" names the default, and a stream can go back to it.
    assert (
        App(name="u", redis_url="redis://127.0.0.1:1", default_hasher="md5").settings.default_hasher
        is md5_hasher
    )
    back = fast.stream("keyed", record=Keyed, partition_by="key", hasher="md5")
    assert back.hasher is md5_hasher


def test_xxhash_without_the_package_names_the_extra(app, monkeypatch):
    from pydantic import ValidationError

    from runnel.exceptions import Misconfigured

    monkeypatch.setitem(sys.modules, "xxhash", None)  # as if not installed: import fails
    with pytest.raises(Misconfigured, match=r"xxhash package.*runnel\[xxhash\]"):
        app.stream("clicks", record=Click, partition_by="user", hasher="xxhash")
    with pytest.raises(ValidationError, match=r"runnel\[xxhash\]"):
        App(name="u", redis_url="redis://127.0.0.1:1", default_hasher="xxhash")
    # The default needs nothing.
    assert app.stream("clicks", record=Click, partition_by="user").hasher is md5_hasher


def test_unknown_hasher_name(app):
    from runnel.exceptions import Misconfigured

    with pytest.raises(Misconfigured, match="unknown hasher 'sha9'"):
        app.stream("clicks", record=Click, partition_by="user", hasher="sha9")
