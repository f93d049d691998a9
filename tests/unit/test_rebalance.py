"""Rebalance: the pure ``assign`` and ``moved`` functions (even, sticky, deterministic)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runnel.rebalance import assign, moved

# Short names over a tiny alphabet: many share prefixes, so name order is exercised.
NAMES = st.text(alphabet="abcde", min_size=1, max_size=3)
COUNTS = st.integers(min_value=0, max_value=64)
MEMBER_SETS = st.lists(NAMES, min_size=0, max_size=10, unique=True)
STALE = ["x", "yy", "zzz"]  # never drawn by NAMES: members that have gone away

SETTINGS = settings(max_examples=200, deadline=None)


# --- independent oracles ------------------------------------------------------------------


def partitions_of(assignment: Mapping[str, Iterable[int]]) -> list[int]:
    return sorted(p for ps in assignment.values() for p in ps)


def min_moves(count: int, members: Iterable[str], previous: Mapping[str, Iterable[int]]) -> int:
    """The fewest owner changes any even spread can make, for a non-overlapping ``previous``.

    Brute force over which members get the ``+1``: a member can keep at most
    ``min(held, quota)`` of what it holds, everything else (stale owners, unowned) moves.
    """
    names = sorted(set(members))
    if not names:
        return 0
    base, extra = divmod(count, len(names))
    held = {m: len({p for p in previous.get(m, ()) if 0 <= p < count}) for m in names}
    best = max(
        sum(min(held[m], base + (1 if m in chosen else 0)) for m in names)
        for chosen in map(set, combinations(names, extra))
    )
    return count - best


def owner_changes(before: Mapping[str, Iterable[int]], after: Mapping[str, Iterable[int]]) -> int:
    """``moved`` re-derived partition by partition (``before`` must not overlap)."""
    was = {}
    for m, ps in before.items():
        for p in ps:
            assert p not in was, "oracle needs a non-overlapping 'before'"
            was[p] = m
    return sum(1 for m, ps in after.items() for p in ps if was.get(p) != m)


def assert_even(count: int, members: Iterable[str], result: Mapping[str, list[int]]) -> None:
    names = set(members)
    assert set(result) == names
    if not names:
        assert result == {}
        return
    assert partitions_of(result) == list(range(count))
    base = count // len(names)
    for m, ps in result.items():
        assert base <= len(ps) <= base + 1, (m, ps)
    # The +1s add up: exactly count % n members carry one more than the base.
    assert sum(1 for ps in result.values() if len(ps) == base + 1) == count % len(names)


# --- strategies ---------------------------------------------------------------------------


@st.composite
def arbitrary_cases(draw: st.DrawFn) -> tuple[int, list[str], dict[str, list[int]]]:
    """Anything goes in ``previous``: stale members, out-of-range and duplicated partitions."""
    count = draw(COUNTS)
    members = draw(MEMBER_SETS)
    owners = st.sampled_from(members + STALE) if members else st.sampled_from(STALE)
    previous = draw(
        st.dictionaries(
            st.one_of(owners, NAMES),
            st.lists(st.integers(min_value=-3, max_value=count + 3), max_size=2 * count + 4),
            max_size=12,
        )
    )
    return count, members, previous


@st.composite
def valid_cases(draw: st.DrawFn) -> tuple[int, list[str], dict[str, list[int]]]:
    """A non-overlapping ``previous``; may still hold stale owners and out-of-range partitions."""
    count = draw(COUNTS)
    members = draw(MEMBER_SETS)
    with_junk = draw(st.booleans())
    candidates = members + (STALE if with_junk else [])
    previous: dict[str, list[int]] = {}
    if candidates:
        extra_ids = list(range(-2, 0)) + list(range(count, count + 3)) if with_junk else []
        for p in list(range(count)) + extra_ids:
            owner = draw(st.none() | st.sampled_from(candidates))
            if owner is not None:
                previous.setdefault(owner, []).append(p)
        for name in previous:
            previous[name] = draw(st.permutations(previous[name]))
    return count, members, previous


@st.composite
def even_cases(draw: st.DrawFn) -> tuple[int, list[str], dict[str, list[int]]]:
    """An even assignment among ``members`` (as ``assign`` itself would leave it)."""
    count, members, previous = draw(arbitrary_cases())
    return count, members, assign(count, members, previous)


# --- properties ---------------------------------------------------------------------------


@SETTINGS
@given(arbitrary_cases())
def test_every_partition_once_only_members_and_even(case) -> None:
    count, members, previous = case
    assert_even(count, members, assign(count, members, previous))


@SETTINGS
@given(arbitrary_cases())
def test_no_members_means_no_assignment(case) -> None:
    count, _, previous = case
    assert assign(count, [], previous) == {}


@SETTINGS
@given(arbitrary_cases(), st.randoms(use_true_random=False))
def test_deterministic_whatever_the_order(case, rnd) -> None:
    count, members, previous = case
    expected = assign(count, members, previous)

    shuffled_members = list(members) * 2  # duplicates in the iterable are one member
    rnd.shuffle(shuffled_members)
    items = list(previous.items())
    rnd.shuffle(items)
    reordered = {}
    for name, ps in items:
        ps = list(ps)
        rnd.shuffle(ps)
        reordered[name] = ps

    assert assign(count, shuffled_members, reordered) == expected
    # Any iterable will do, on either side.
    as_tuples = {name: tuple(ps) for name, ps in reordered.items()}
    assert assign(count, iter(shuffled_members), as_tuples) == expected
    as_sets = {name: set(ps) for name, ps in reordered.items()}
    assert assign(count, frozenset(members), as_sets) == expected


@SETTINGS
@given(arbitrary_cases())
def test_inputs_are_not_mutated(case) -> None:
    count, members, previous = case
    members_copy = list(members)
    previous_copy = {name: list(ps) for name, ps in previous.items()}
    result = assign(count, members, previous)
    assert members == members_copy
    assert previous == previous_copy
    for ps in result.values():  # the result shares no list with the input
        assert all(ps is not q for q in previous.values())


@SETTINGS
@given(valid_cases())
def test_sticky_moves_are_minimal(case) -> None:
    count, members, previous = case
    result = assign(count, members, previous)
    assert moved(previous, result) == owner_changes(previous, result)
    assert moved(previous, result) == min_moves(count, members, previous)


@SETTINGS
@given(valid_cases())
def test_sticky_nobody_loses_a_partition_it_could_keep(case) -> None:
    """Each member keeps ``min(held, quota)``: only a surplus above its quota leaves it."""
    count, members, previous = case
    result = assign(count, members, previous)
    for m, ps in result.items():
        held = {p for p in previous.get(m, ()) if 0 <= p < count}
        assert len(held & set(ps)) == min(len(held), len(ps)), m


@SETTINGS
@given(even_cases(), NAMES.map(lambda s: "new" + s))
def test_adding_a_member_moves_at_most_its_share(case, newcomer) -> None:
    count, members, start = case
    after = assign(count, [*members, newcomer], start)
    assert_even(count, [*members, newcomer], after)
    n_after = len(members) + 1
    assert moved(start, after) <= math.ceil(count / n_after)
    assert moved(start, after) == min_moves(count, [*members, newcomer], start)
    # Nothing shuffles between the old members: whatever moves, moves to the newcomer.
    for m in members:
        assert set(after[m]) <= set(start[m]), m


@SETTINGS
@given(even_cases().filter(lambda c: len(c[1]) >= 2), st.data())
def test_removing_a_member_moves_only_its_partitions(case, data) -> None:
    count, members, start = case
    gone = data.draw(st.sampled_from(members))
    rest = [m for m in members if m != gone]
    after = assign(count, rest, start)
    assert_even(count, rest, after)
    assert moved(start, after) == len(start[gone])
    for m in rest:
        assert set(start[m]) <= set(after[m]), m
    changed = {p for m, ps in after.items() for p in ps if p not in start[m]}
    assert changed == set(start[gone])


def test_removing_the_last_member_leaves_nothing() -> None:
    assert assign(8, [], {"a": list(range(8))}) == {}


@SETTINGS
@given(COUNTS, st.lists(NAMES, min_size=3, max_size=3, unique=True))
def test_join_then_leave_walk_stays_even_and_minimal(count, names) -> None:
    first, second, third = names
    steps = [[first], [first, second], [first, second, third], [first, second], [first]]
    current: dict[str, list[int]] = {}
    for members in steps:
        nxt = assign(count, members, current)
        assert_even(count, members, nxt)
        assert moved(current, nxt) == min_moves(count, members, current)
        current = nxt
    assert current == {first: list(range(count))}


# --- literal examples ---------------------------------------------------------------------


def test_eight_partitions_walk_literally() -> None:
    one = assign(8, ["a"], {})
    assert one == {"a": [0, 1, 2, 3, 4, 5, 6, 7]}
    assert moved({}, one) == 8  # nobody owned them before: all count

    two = assign(8, ["a", "b"], one)
    assert two == {"a": [0, 1, 2, 3], "b": [4, 5, 6, 7]}
    assert moved(one, two) == 4

    three = assign(8, ["a", "b", "c"], two)
    assert three == {"a": [0, 1, 2], "b": [4, 5, 6], "c": [3, 7]}
    assert moved(two, three) == 2

    back_to_two = assign(8, ["a", "b"], three)
    assert back_to_two == {"a": [0, 1, 2, 3], "b": [4, 5, 6, 7]}
    assert moved(three, back_to_two) == 2

    back_to_one = assign(8, ["a"], back_to_two)
    assert back_to_one == one
    assert moved(back_to_two, back_to_one) == 4


def test_fresh_spread_goes_lowest_name_first() -> None:
    assert assign(5, ["b", "a"], {}) == {"a": [0, 1, 2], "b": [3, 4]}
    assert assign(2, ["c", "a", "b"], {}) == {"a": [0], "b": [1], "c": []}


def test_zero_partitions() -> None:
    assert assign(0, ["a", "b"], {"a": [0, 1]}) == {"a": [], "b": []}


def test_the_plus_one_goes_to_whoever_already_holds_more() -> None:
    # 5 over 2: b already holds 3, so b gets the extra one and nothing moves.
    previous = {"a": [0, 1], "b": [2, 3, 4]}
    assert assign(5, ["a", "b"], previous) == previous
    assert moved(previous, assign(5, ["a", "b"], previous)) == 0


def test_stale_out_of_range_and_duplicates() -> None:
    previous = {
        "gone": [0, 1],  # stale owner: its partitions are free
        "a": [2, 2, 9, -1],  # a duplicate within one member, out-of-range ids
        "b": [2, 3],  # 2 also claimed by a: the lowest name keeps it
    }
    result = assign(4, ["a", "b"], previous)
    assert result == {"a": [0, 2], "b": [1, 3]}


def test_a_member_without_previous_gets_its_share() -> None:
    assert assign(4, ["a", "b"], {"a": [0, 1, 2, 3]}) == {"a": [0, 1], "b": [2, 3]}


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ({}, {}, 0),
        ({}, {"a": [0, 1]}, 2),
        ({"a": [0, 1]}, {"a": [0, 1]}, 0),
        ({"a": [0, 1]}, {"a": [0], "b": [1]}, 1),
        ({"a": [0, 1], "b": [2]}, {"a": [2], "b": [0, 1]}, 3),
        ({"a": [0, 1, 2]}, {"a": [0]}, 0),  # a partition dropped is not "moved"
        ({"a": (0,), "b": {1}}, {"a": iter([1]), "b": [0]}, 2),  # any iterables
    ],
)
def test_moved_examples(before, after, expected) -> None:
    assert moved(before, after) == expected


@SETTINGS
@given(valid_cases())
def test_moved_against_itself_is_zero_and_from_nothing_is_count(case) -> None:
    count, members, previous = case
    result = assign(count, members, previous)
    assert moved(result, result) == 0
    assert moved({}, result) == (count if members else 0)
