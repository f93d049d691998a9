"""Who may use the dashboard: with a token or basic-auth credentials configured, every
request (the page, its JSON, its actions) must carry them, else 401.

A browser brings the token once in the address (``/?token=...``); the page answers with
a cookie (HttpOnly, SameSite=Strict) holding it and sends the browser on to the bare
address, so the token leaves the address bar. A script sends ``Authorization: Bearer``.
Basic auth is the browser's own prompt. Secrets are compared in constant time and never
logged or shown. The middleware that asks is in guard.py.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command imports this module; the server (starlette) runs later
    from starlette.requests import Request

TOKEN_ENV = "RUNNEL_DASHBOARD_TOKEN"
BASIC_AUTH_ENV = "RUNNEL_DASHBOARD_BASIC_AUTH"
COOKIE = "runnel_dashboard_token"
LOCAL = "local"
"""Who a request is when no credentials are configured (the audit log says so)."""


@dataclass(frozen=True)
class Access:
    token: str | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def required(self) -> bool:
        return self.token is not None or self.user is not None

    def who(self, request: Request) -> str | None:
        """The basic-auth user, "token", or "local" when nothing is required; None when
        the request lacks the credentials asked for."""
        if not self.required:
            return LOCAL
        kind, _, value = request.headers.get("authorization", "").partition(" ")
        if self.user is not None and kind.lower() == "basic":
            user, password = _basic(value.strip())
            if user is not None and same(user, self.user) and same(password, self.password):
                return self.user
        if self.token is not None:
            given = value.strip() if kind.lower() == "bearer" else request.cookies.get(COOKIE)
            if given is not None and same(given, self.token):
                return "token"
        return None


def parse_basic(text: str) -> tuple[str, str] | None:
    """USER:PASSWORD split at the first colon; None unless both parts are there."""
    user, colon, password = text.partition(":")
    return (user, password) if colon and user and password else None


def _basic(value: str) -> tuple[str | None, str]:
    try:
        user, colon, password = base64.b64decode(value, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None, ""
    return (user, password) if colon else (None, "")


def same(given: str, expected: str | None) -> bool:
    return expected is not None and secrets.compare_digest(given.encode(), expected.encode())
