"""Routing keys to partitions.

The default hasher must give the same number for the same key on every machine, every
Python version and whatever else is installed, forever: existing streams depend on it to
keep a key's events in one partition. It is the md5 of the key's ``repr``, as an integer,
which is also what runnel 0.1 used unless ``xxhash`` was installed.

``"xxhash"`` names the other hasher runnel 0.1 had (chosen there by installing
``runnel[fast]``): the 64-bit xxHash (XXH64, seed 0) of the UTF-8 ``repr`` of the key, as
an unsigned integer. It is only ever used when asked for by name, and needs the
``xxhash`` package (the ``xxhash`` extra).
"""

from __future__ import annotations

from collections.abc import Callable
from hashlib import md5
from typing import Any

from runnel.exceptions import Misconfigured

Hasher = Callable[[Any], int]

XXHASH_EXTRA = "runnel[xxhash] (or runnel-core[xxhash])"


def md5_hasher(key: Any) -> int:
    """Hash ``repr(key)`` with md5; stable across processes, unlike ``hash()``."""
    return int(md5(repr(key).encode("utf-8")).hexdigest(), 16)


def xxhash_hasher() -> Hasher:
    """runnel 0.1's fast hasher; raises :class:`Misconfigured` without the package."""
    try:
        from xxhash import xxh64_intdigest
    except ImportError:
        raise Misconfigured(
            f'hasher "xxhash" needs the xxhash package: install the extra {XXHASH_EXTRA}'
        ) from None

    def xxhash64(key: Any) -> int:
        """XXH64 (seed 0) of ``repr(key)`` in UTF-8."""
        return xxh64_intdigest(repr(key).encode("utf-8"))

    return xxhash64


HASHERS: dict[str, Callable[[], Hasher]] = {
    "md5": lambda: md5_hasher,
    "xxhash": xxhash_hasher,
}
"""Hashers that can be named (``hasher="xxhash"``, ``RUNNEL_DEFAULT_HASHER=xxhash``)."""


def named_hasher(name: str) -> Hasher | None:
    """The hasher called ``name``, or None if no hasher has that name."""
    make = HASHERS.get(name.lower())
    return make() if make is not None else None


def resolve_hasher(value: Any) -> Hasher:
    """A hasher from a callable or a name in :data:`HASHERS`."""
    if isinstance(value, str):
        found = named_hasher(value)
        if found is None:
            raise Misconfigured(
                f"unknown hasher {value!r}: name one of {', '.join(HASHERS)}, or pass a function"
            )
        return found
    if not callable(value):
        raise Misconfigured(f"a hasher must be a function of the key or a name, not {value!r}")
    return value


default_hasher = md5_hasher


def fasthash(key: Any) -> int:
    """runnel 0.1's ``runnel.hashing.fasthash``: the ``"xxhash"`` hasher, importable by
    the dotted path a 0.1 ``default_hasher`` setting named it with."""
    return xxhash_hasher()(key)


# runnel 0.1's names, for settings that name a hasher by import path. Its ``default`` was
# fasthash when xxhash happened to be installed; here it is always md5 (see above).
md5hash = md5_hasher
default = default_hasher
