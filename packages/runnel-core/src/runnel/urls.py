"""Store URLs as they may be shown: with any password replaced by ``***``."""

from __future__ import annotations

import re

_USERINFO = re.compile(r"(?P<head>^[^:/?#]*://[^:@/?#]*):[^@/?#]*@")
_QUERY_SECRET = re.compile(r"(?P<head>[?&](?:password|pass|pwd)=)[^&#]*", re.IGNORECASE)


def redact(url: str) -> str:
    """``redis://bob:secret@host:6379/0`` -> ``redis://bob:***@host:6379/0``.

    Works on malformed URLs too (a bad port, no scheme), since those are exactly the ones
    that end up in error messages.
    """
    shown = _USERINFO.sub(r"\g<head>:***@", url)
    shown = _QUERY_SECRET.sub(r"\g<head>***", shown)
    if "://" not in shown and "@" in shown:
        # No scheme: whatever comes before the last "@" may hold a password.
        shown = "***@" + shown.rsplit("@", 1)[1]
    return shown
