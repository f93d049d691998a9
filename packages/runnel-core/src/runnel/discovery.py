"""``autodiscover``: import modules by glob so their ``@app`` decorators register."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path


def autodiscover(pattern: str, root: str | None = None) -> list[str]:
    """Import every module under ``root`` (default: cwd) whose path matches ``pattern``."""
    base = Path(root or os.getcwd())
    if str(base) not in sys.path:
        sys.path.insert(0, str(base))
    imported = []
    for path in sorted(base.glob(pattern)):
        if path.suffix != ".py":
            continue
        rel = path.relative_to(base).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        importlib.import_module(name)
        imported.append(name)
    return imported
