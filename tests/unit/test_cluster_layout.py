"""The key layouts: the classic one is keys.py unchanged; the cluster one keeps every key of an
atomic step in one slot, whatever the names, and never gives two things one key."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.crc import key_slot

from runnel.exceptions import Misconfigured
from runnel_redis import keys
from runnel_redis.layout import Classic, Cluster, KeyLayout, encode, hash_tag, layout_for

# Names with the characters that matter: separators, braces, percent signs, unicode (but
# no lone surrogates: they cannot be encoded as UTF-8, so no Redis key can hold them).
chars = st.sampled_from("ab.:{}%é中\\ -_0") | st.characters(exclude_categories=["Cs"])
names = st.text(alphabet=chars, max_size=12)
numbers = st.integers(min_value=0, max_value=10_000)
cluster = Cluster()
LOADED = settings(deadline=None)
"""No per-example deadline: the machine may be busy; these are not timing tests."""


def slot(key: str) -> int:
    return key_slot(key.encode())


def slots(*found: str) -> set[int]:
    return {slot(key) for key in found}


@LOADED
@given(names, names, names, names, numbers)
def test_a_partition_stream_and_its_locks_share_a_slot(
    app: str, stream: str, first: str, second: str, number: int
) -> None:
    together = slots(
        cluster.partition(app, stream, number),
        cluster.partition_lock(app, stream, first, number),
        cluster.partition_lock(app, stream, second, number),
    )
    assert together == {slot("{" + cluster.partition_tag(app, stream, number) + "}")}


@LOADED
@given(names, names, names, names, names)
def test_the_keys_of_a_processor_share_a_slot(
    app: str, stream: str, processor: str, first: str, second: str
) -> None:
    together = slots(
        cluster.membership(app, stream, processor),
        cluster.control(app, stream, processor),
        cluster.admin_lock(app, stream, processor),
        cluster.quarantine(app, stream, processor),
        cluster.heartbeat(app, stream, processor, first),
        cluster.heartbeat(app, stream, processor, second),
    )
    assert len(together) == 1


@LOADED
@given(names, names, names)
def test_the_leader_and_the_whole_job_queue_share_a_slot(
    app: str, job_id: str, executor: str
) -> None:
    prefix = cluster.jobs_prefix(app)
    together = slots(
        cluster.leader(app),
        cluster.job_queue(app),
        cluster.job_schedule(app),
        cluster.job_dead(app),
        cluster.job_results_index(app),
        cluster.job_executors(app),
        cluster.job(app, job_id),
        cluster.job_result(app, job_id),
        cluster.job_beat(app, executor),
        # What the job scripts build inside Lua from the prefix they are given.
        prefix + "job." + job_id,
        prefix + "result." + job_id,
    )
    assert len(together) == 1
    assert cluster.job(app, job_id) == prefix + "job." + job_id
    assert cluster.job_result(app, job_id) == prefix + "result." + job_id


@LOADED
@given(names, names, names, names, numbers)
def test_names_with_braces_cannot_move_the_tag(
    app: str, stream: str, processor: str, executor: str, number: int
) -> None:
    expected = {
        cluster.partition(app, stream, number): cluster.partition_tag(app, stream, number),
        cluster.partition_lock(app, stream, processor, number): cluster.partition_tag(
            app, stream, number
        ),
        cluster.heartbeat(app, stream, processor, executor): cluster.processor_tag(
            app, stream, processor
        ),
        cluster.admin_lock(app, stream, processor): cluster.processor_tag(app, stream, processor),
        cluster.job(app, executor): cluster.app_tag(app),
        cluster.schemas(app, stream): cluster.stream_tag(app, stream),
    }
    for key, tag in expected.items():
        assert hash_tag(key) == tag
        assert "{" not in tag and "}" not in tag


@LOADED
@given(names)
def test_encoding_is_reversible(name: str) -> None:
    encoded = encode(name)
    assert (unquote(encoded) if encoded != "%" else "") == name
    assert encoded and not set(encoded) & set("{}.:")


def _every_key(layout: KeyLayout) -> st.SearchStrategy[tuple[str, tuple[Any, ...], str]]:
    """(kind, arguments, key) for any key kind of a layout."""
    kinds = {
        "partition": (names, names, numbers),
        "membership": (names, names, names),
        "control": (names, names, names),
        "partition_lock": (names, names, names, numbers),
        "admin_lock": (names, names, names),
        "heartbeat": (names, names, names, names),
        "quarantine": (names, names, names),
        "leader": (names,),
        "schemas": (names, names),
        "job_queue": (names,),
        "job_schedule": (names,),
        "job_dead": (names,),
        "job_results_index": (names,),
        "job_executors": (names,),
        "job": (names, names),
        "job_result": (names, names),
        "job_beat": (names, names),
    }

    def build(kind: str) -> st.SearchStrategy[tuple[str, tuple[Any, ...], str]]:
        return st.tuples(*kinds[kind]).map(lambda args: (kind, args, getattr(layout, kind)(*args)))

    return st.sampled_from(sorted(kinds)).flatmap(build)


@LOADED
@given(_every_key(cluster), _every_key(cluster))
def test_different_things_never_share_a_cluster_key(
    one: tuple[str, tuple[Any, ...], str], other: tuple[str, tuple[Any, ...], str]
) -> None:
    if one[:2] != other[:2]:
        assert one[2] != other[2]


def test_the_same_names_collide_only_in_the_classic_layout() -> None:
    """0.1's dotted names are ambiguous; the cluster layout's are not."""
    assert keys.partition("a.b", "c", 1) == keys.partition("a", "b.c", 1)
    assert cluster.partition("a.b", "c", 1) != cluster.partition("a", "b.c", 1)
    assert keys.partition_lock("a", "s.x", "p", 0) == keys.partition_lock("a", "s", "x.p", 0)
    assert cluster.partition_lock("a", "s.x", "p", 0) != cluster.partition_lock("a", "s", "x.p", 0)
    # A processor named "admin" and the admin lock of a processor named "3".
    assert cluster.partition_lock("a", "s", "admin", 3) != cluster.admin_lock("a", "s", "3")


def test_the_cluster_keys_read_like_the_classic_ones() -> None:
    assert cluster.partition("shop", "orders", 3) == "__strm:{shop.orders.3}"
    assert cluster.partition_lock("shop", "orders", "totals", 3) == "__lock:{shop.orders.3}.totals"
    assert cluster.membership("shop", "orders", "totals") == "__memb:{shop.orders:totals}"
    assert cluster.admin_lock("shop", "orders", "totals") == "__lock:{shop.orders:totals}.admin"
    assert cluster.heartbeat("shop", "orders", "totals", "e1") == "__beat:{shop.orders:totals}.e1"
    assert cluster.leader("shop") == "__lead:{shop}"
    assert cluster.job_queue("shop") == "__jobs:{shop}.queue"
    assert cluster.schemas("shop", "orders") == "__schm:{shop.orders}"
    assert cluster.partition("shop", "dead.orders", 0) == "__strm:{shop.dead%2Eorders.0}"
    assert cluster.partition("a{b}", "c", 0) == "__strm:{a%7Bb%7D.c.0}"


def test_the_partitions_of_a_stream_spread_over_slots() -> None:
    assert len(slots(*(cluster.partition("shop", "orders", n) for n in range(16)))) == 16


@LOADED
@given(_every_key(Classic()))
def test_the_classic_layout_is_keys_py_unchanged(found: tuple[str, tuple[Any, ...], str]) -> None:
    kind, args, key = found
    assert key == getattr(keys, kind)(*args)


@pytest.mark.parametrize(
    ("url", "setting", "expected"),
    [
        ("redis://localhost:6379/0", None, "classic"),
        ("rediss://h:6380", None, "classic"),
        ("redis+sentinel://h:26379/mymaster", None, "classic"),
        ("redis+cluster://127.0.0.1:7000", None, "cluster"),
        ("rediss+cluster://user:secret@h:7000", None, "cluster"),
        ("REDIS+CLUSTER://h:7000", None, "cluster"),
        ("redis://localhost:6379/0", "cluster", "cluster"),
        ("redis+cluster://h:7000", "Classic", "classic"),
        ("redis+cluster://h:7000", "", "cluster"),
    ],
)
def test_the_layout_follows_the_scheme_unless_a_setting_names_one(
    url: str, setting: str | None, expected: str
) -> None:
    assert layout_for(url, setting).name == expected


def test_an_unknown_layout_setting_is_refused_clearly() -> None:
    with pytest.raises(
        Misconfigured, match=r"unknown key layout 'slots' \(known: classic, cluster\)"
    ):
        layout_for("redis+cluster://user:secret@h:7000", "slots")
