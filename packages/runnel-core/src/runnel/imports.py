"""Importing user objects named as ``module:attribute`` (the CLI's MODULE:APP and friends)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from runnel.exceptions import RunnelError


class ImportTargetError(RunnelError):
    """A ``MODULE:NAME`` could not be imported or does not name the expected object."""


def cwd_importable() -> None:
    """Let modules in the current directory be imported, as ``python -m`` does."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())


def import_path(target: str) -> Any:
    """Import ``module:attr``, or runnel 0.1's dotted ``package.module.attr`` (its settings
    took import paths in that form: the module is everything before the last dot)."""
    if ":" not in target and "." in target:
        module_name, _, attr = target.rpartition(".")
        target = f"{module_name}:{attr}"
    return import_object(target)


def import_object(target: str) -> Any:
    """Import ``module.path:attr.path``; the current directory is importable, as with ``-m``."""
    module_name, sep, attr_path = target.partition(":")
    if not sep or not module_name or not attr_path:
        raise ImportTargetError(f"{target!r} is not of the form MODULE:NAME")
    cwd_importable()
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise ImportTargetError(f"cannot import module {module_name!r}") from exc
        raise
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportTargetError(
                f"module {module_name!r} has no attribute {attr_path!r}"
            ) from None
    return obj
