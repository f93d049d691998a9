"""The middleware that asks every request for the dashboard's credentials (access.py)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from runnel_dashboard.access import COOKIE, Access, same


class RequireAccess:
    """ASGI middleware: 401 for a request without the credentials, with the challenge
    that fits (Basic, so that the browser asks; else Bearer); the caller's name, for the
    audit log, in ``request.state.who``."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        who = self.access.who(request)
        if who is None and self.access.token is not None:
            answer = self._token_in_address(request)
            if answer is not None:
                await answer(scope, receive, send)
                return
        if who is None:
            await self._refuse(request)(scope, receive, send)
            return
        scope.setdefault("state", {})["who"] = who
        await self.app(scope, receive, send)

    def _token_in_address(self, request: Request) -> Response | None:
        """``?token=`` with the right token: the cookie, and the address without it."""
        given = request.query_params.get("token")
        if given is None or not same(given, self.access.token):
            return None
        rest = [(k, v) for k, v in parse_qsl(request.url.query) if k != "token"]
        target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
        answer = RedirectResponse(target, status_code=303)
        answer.set_cookie(
            COOKIE, given, httponly=True, samesite="strict", secure=request.url.scheme == "https"
        )
        answer.headers["Cache-Control"] = "no-store"
        return answer

    def _refuse(self, request: Request) -> Response:
        if self.access.user is not None:
            challenge = 'Basic realm="runnel dashboard", charset="UTF-8"'
        else:
            challenge = 'Bearer realm="runnel dashboard"'
        headers = {"WWW-Authenticate": challenge, "Cache-Control": "no-store"}
        how = "basic auth" if self.access.user is not None else "?token=TOKEN or a Bearer header"
        text = f"authentication required: {how}"
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": text}, status_code=401, headers=headers)
        return PlainTextResponse(text, status_code=401, headers=headers)
