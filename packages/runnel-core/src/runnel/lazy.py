"""Names of a package imported on first use (PEP 562), so that ``import runnel`` and a
worker's start do not load every part of the library."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, where: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names ``where`` maps to
    the module defining each; a name found once is kept in ``namespace`` (the package's
    globals), so later lookups do not come here."""

    def getattr_(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted([*namespace, *where])

    return getattr_, dir_
