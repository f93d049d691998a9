"""The dashboard's web application: the page, its JSON feed, and the dead-letter actions.

Actions change the queue, so they are refused (403) unless the server was started with
``--allow-actions``, and a cross-site request cannot make one: each needs the token that
is embedded in the page (another site cannot read the page) and an Origin, when the
browser sends one, of this very server.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from importlib.resources import files
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from runnel.admin.dead_letters import NotFound, select_dead_jobs
from runnel.app import App
from runnel.exceptions import AccessDenied, RunnelError, StoreFull, TransportError
from runnel.runtime.retry import cancel_and_wait
from runnel_dashboard import api
from runnel_dashboard.history import History
from runnel_dashboard.sampler import Sampler
from runnel_dashboard.snapshot import hide_password, snapshot

STATIC = files("runnel_dashboard") / "static"
TOKEN_HEADER = "X-Runnel-Token"
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1", "[::1]"]


@dataclass
class Options:
    allow_actions: bool = False
    loopback_only: bool = True
    """Answer only requests addressed to a loopback name (no DNS rebinding)."""
    sample_every: float = 5.0
    history_hours: float = 24.0
    """How long the history in the store reaches back (history.py)."""
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))


def create_app(app: App, options: Options) -> Starlette:
    sampler = Sampler()
    history = History(app, options.sample_every, options.history_hours)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(sampler.run(lambda: snapshot(app), options.sample_every))
        kept = asyncio.create_task(history.run(lambda: snapshot(app)))
        try:
            yield
        finally:
            await cancel_and_wait([task, kept])
            await app.aclose()

    async def page(request: Request) -> Response:
        text = (STATIC / "index.html").read_text(encoding="utf-8")
        for name, value in (
            ("APP", app.name),
            ("TOKEN", options.token if options.allow_actions else ""),
            ("ACTIONS", "true" if options.allow_actions else "false"),
        ):
            text = text.replace("{{" + name + "}}", html.escape(value))
        return HTMLResponse(text, headers={"Cache-Control": "no-store"})

    async def state(request: Request) -> Response:
        try:
            body = await snapshot(app)
        except Exception as exc:
            return _error(503, _describe(app, exc))
        body["throughput"] = sampler.as_json()
        body["sample_every"] = options.sample_every
        body["allow_actions"] = options.allow_actions
        body["now"] = time.time()
        return JSONResponse(body)

    async def dead_action(request: Request) -> Response:
        refused = _refuse(request, options)
        if refused is not None:
            return _error(403, refused)
        try:
            ids = (await request.json())["ids"]
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or not ids:
                raise ValueError
        except Exception:
            return _error(400, 'send {"ids": [job ids]}')
        try:
            letters = await select_dead_jobs(app, None, tuple(ids))
            if request.path_params["action"] == "replay":
                return JSONResponse({"replayed": await app.job_store.replay(letters, time.time())})
            return JSONResponse({"purged": await app.job_store.purge(letters)})
        except NotFound as exc:
            return _error(404, str(exc))
        except Exception as exc:
            return _error(503, _describe(app, exc))

    middleware = []
    if options.loopback_only:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=LOOPBACK_NAMES))
    return Starlette(
        routes=[
            Route("/", page),
            Route("/api/state", state),
            Route("/api/dead/{action:str}", dead_action, methods=["POST"]),
            *api.routes(app, history, options.allow_actions),
            Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
        ],
        middleware=middleware,
        lifespan=lifespan,
    )


def _refuse(request: Request, options: Options) -> str | None:
    """Why this action request is refused, or None to go ahead."""
    if not options.allow_actions:
        return "read-only dashboard: start it with --allow-actions to replay or purge"
    if request.path_params["action"] not in ("replay", "purge"):
        return "unknown action"
    given = request.headers.get(TOKEN_HEADER, "")
    if not secrets.compare_digest(given.encode(), options.token.encode()):
        return "missing or wrong token: use the buttons of the page"
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host')}":
        return "cross-site request refused"
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return "expected a JSON body"
    return None


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _describe(app: App, exc: Exception) -> str:
    """One line for the page; the store's URL appears with its password hidden."""
    url = hide_password(app.settings.redis_url)
    said = not isinstance(exc, TransportError) or isinstance(exc, AccessDenied | StoreFull)
    if isinstance(exc, RunnelError) and said:  # our own message says what happened
        text = str(exc)
    else:
        text = f"cannot read {url}: {type(exc).__name__}: {exc}"
    password = _password(app.settings.redis_url)
    return text.replace(password, "***") if password else text


def _password(url: str) -> str | None:
    return urlsplit(url).password
