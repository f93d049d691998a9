"""Who did what from the dashboard: one line per action request on the logger
``runnel.dashboard.audit`` (stderr, with the command's other log lines), and with
``--audit-log FILE`` one JSON object per line appended to FILE, so that an action can be
traced to a person after the fact. Refused requests are recorded too."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LOGGER = logging.getLogger("runnel.dashboard.audit")
LOGGER.setLevel(logging.INFO)  # recorded whatever the level of the rest


class Audit:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path

    def record(
        self, who: str, client: str, action: str, target: Any, outcome: str, detail: str
    ) -> None:
        """``outcome``: "done"; "refused" (nothing changed: not allowed, bad arguments,
        no such target, or a state that does not allow it); "failed" (the store could
        not be reached: it may or may not have happened)."""
        shown = json.dumps(target, sort_keys=True)
        LOGGER.info("%s from %s: %s %s: %s: %s", who, client, action, shown, outcome, detail)
        if self.path is None:
            return
        line = {
            "at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "who": who,
            "client": client,
            "action": action,
            "target": target,
            "outcome": outcome,
            "detail": detail,
        }
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, sort_keys=True) + "\n")
