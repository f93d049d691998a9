"""A key's windows as a table stores them. The codec keeps the stored form of a key's
older windows while only its latest changes (the usual change of a tumbling window), and
a view asks it whether windows may change in place: both must answer what encoding and
checking every window would."""

from __future__ import annotations

from typing import Any

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from runnel.codecs.compressors import GzipCompressor
from runnel.codecs.serializers import JSONSerializer, MsgpackSerializer
from runnel.tables.clock import Meta
from runnel.tables.codec import ValueCodec, deferrable
from runnel.tables.windowed import WindowsCodec, _array_header
from runnel.tables.windows import NEVER, KeyWindows, Tumbling, close

CODECS = [
    WindowsCodec(JSONSerializer(), None),
    WindowsCodec(JSONSerializer(GzipCompressor()), None),
    WindowsCodec(MsgpackSerializer(), None),
]
values = st.one_of(
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
    st.tuples(st.integers(0, 9)),
    st.lists(st.integers(0, 9), max_size=2),
)
# (event time, the value it sets, whether the watermark then reaches it (closing and
# expiring windows), whether a commit encodes the key then, whether the windows' mutable
# values are then changed in place)
steps = st.lists(
    st.tuples(st.integers(0, 500), values, st.booleans(), st.booleans(), st.booleans()),
    max_size=60,
)


def whole(codec: WindowsCodec, kw: KeyWindows) -> bytes:
    """Every window encoded, as the codec did before it kept anything."""
    items = [[s, e, ValueCodec.encode(codec, v)] for s, e, v in kw.items]
    return msgpack.packb([1, kw.closed_upto, items])


def replace(_old: Any, new: Any) -> Any:
    return new


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CODECS), st.integers(0, 40), st.sampled_from([NEVER, 30.0]), steps)
def test_a_key_encodes_as_all_of_its_windows_whatever_was_kept(
    codec: WindowsCodec,
    held: int,
    closed_upto: float,
    changes: list[tuple[int, Any, bool, bool, bool]],
) -> None:
    kind = Tumbling(10)
    kw = KeyWindows(tuple((10 * i, 10 * i + 10, i) for i in range(held)), closed_upto)
    for t, value, moves, commit, mutate in changes:
        t += 10 * held  # mostly the latest window, sometimes a new one or an older one
        changed = kind.bump(kw, t, replace, value, NEVER)
        if changed is None:
            changed = kind.apply(kw, t, lambda _old, v=value: v, 0)
        kw = changed
        if moves:  # windows ended 20 before close; 200 before, they expire
            kw = close(kind, kw, t, 20, 200)[0] or KeyWindows()
        # Deferred to the commit only when every window not yet encoded surely encodes.
        kept = kw.head[0] if kw.head is not None else 0
        assert codec.frozen(kw) == all(deferrable(v) for _, _, v in kw.items[kept:])
        if commit:
            data = codec.encode(kw)
            assert data == whole(codec, kw)
            assert whole(codec, codec.decode(data)) == data
        if mutate:  # a value that may change in place is never kept encoded
            for _, _, v in kw.items:
                if isinstance(v, list):
                    v.append(1)
    assert codec.encode(kw) == whole(codec, kw)


def test_array_headers_are_msgpacks() -> None:
    for n in (0, 1, 15, 16, 0xFFFF, 0x10000):
        packed = msgpack.packb([None] * n)
        assert _array_header(n) == packed[: len(packed) - n]


def test_a_clock_encodes_as_before() -> None:
    for codec in CODECS:
        for meta in (Meta(), Meta(1_700_000_000.5, 3)):
            data = codec.encode(meta)
            assert data == msgpack.packb([0, meta.watermark, meta.late])
            assert codec.decode(data) == meta
