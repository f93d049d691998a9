"""runnel 0.1's ``init_logging``, kept so 0.1 start-up scripts work.

New code calls :func:`runnel.logs.configure` (or lets ``runnel worker`` do it).
"""

from __future__ import annotations

from runnel.logs import FORMATS, LEVELS, configure


def init_logging(level: str = "debug", format: str = "console") -> None:
    """Configure log output as 0.1 did: ``level`` by name, ``format`` console or json."""
    if level.lower() not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    configure(level.lower(), format)


__all__ = ["init_logging"]
