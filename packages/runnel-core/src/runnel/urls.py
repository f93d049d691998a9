"""Store URLs as they may be shown: with any password replaced by ``***``."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlsplit

_USERINFO = re.compile(r"(?P<head>^[^:/?#]*://[^:@/?#]*):[^@/?#]*@")
_QUERY_SECRET = re.compile(r"(?P<head>[?&](?:[\w.-]*password|pass|pwd)=)[^&#]*", re.IGNORECASE)
"""A query option holding a password: ``password=``, ``sentinel_password=``, ..."""


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


def secrets(url: str) -> list[str]:
    """The passwords ``url`` holds (its user's, and any query option's such as
    ``sentinel_password``), as written and decoded: the texts to hide from a message that
    may quote them, such as a server's reply."""
    found: list[str] = []
    try:
        parts = urlsplit(url)
        if parts.password:
            found.append(parts.password)
        for name, value in parse_qsl(parts.query):
            if value and _QUERY_SECRET.match(f"?{name}="):
                found.append(value)
    except ValueError:
        return found
    found += [unquote(s) for s in found]
    return sorted({s for s in found if s}, key=len, reverse=True)
