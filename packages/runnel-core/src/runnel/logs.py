"""Log output for workers and the CLI: human-readable console lines or one JSON object per line."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime

import orjson

_RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=repr).decode()


def configure(level: str = "info", fmt: str = "console") -> None:
    """Send Runnel's logs to stderr in the chosen format (idempotent)."""
    logger = logging.getLogger("runnel")
    logger.setLevel(level.upper())
    for handler in list(logger.handlers):
        if getattr(handler, "_runnel", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler._runnel = True  # type: ignore[attr-defined]
    if fmt == "json":
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")
        )
    logger.addHandler(handler)
    logger.propagate = False
