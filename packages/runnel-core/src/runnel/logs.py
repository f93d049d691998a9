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


LEVELS = ("debug", "info", "warning", "error", "critical")
FORMATS = ("console", "json")


def configure(level: str = "info", fmt: str = "console") -> None:
    """Send every log record of the process to stderr in the chosen format (idempotent).

    The handler sits on the root logger, so an app's own loggers
    (``logging.getLogger("myapp")``) come out at the same level and in the same format
    as Runnel's; a handler the app installed itself is left in place.
    """
    root = logging.getLogger()
    root.setLevel(level.upper())
    runnel = logging.getLogger("runnel")
    for logger in (root, runnel):
        for handler in list(logger.handlers):
            if getattr(handler, "_runnel", False):
                logger.removeHandler(handler)
    runnel.setLevel(logging.NOTSET)
    runnel.propagate = True
    handler = logging.StreamHandler(sys.stderr)
    handler._runnel = True  # type: ignore[attr-defined]
    if fmt == "json":
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")
        )
    root.addHandler(handler)
