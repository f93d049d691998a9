"""Routing keys to partitions.

The default hasher must give the same number for the same key on every machine, every
Python version and whatever else is installed, forever: existing streams depend on it to
keep a key's events in one partition. It is the md5 of the key's ``repr``, as an integer,
which is also what runnel 0.1 used by default.
"""

from __future__ import annotations

from hashlib import md5
from typing import Any


def md5_hasher(key: Any) -> int:
    """Hash ``repr(key)`` with md5; stable across processes, unlike ``hash()``."""
    return int(md5(repr(key).encode("utf-8")).hexdigest(), 16)


default_hasher = md5_hasher
