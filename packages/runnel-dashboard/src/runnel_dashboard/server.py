"""The dashboard's web application: the page, its JSON feeds, and its actions.

Actions change the app's state, so they are refused (403) unless the server was started
with ``--allow-actions``, off loopback unless credentials are required, and a cross-site
request cannot make one: each needs the token that is embedded in the page (another site
cannot read the page), a JSON body, and an Origin, when the browser sends one, of this
very server. Every action request, done or refused, goes to the audit log (audit.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from runnel.admin.dead_letters import NotFound
from runnel.app import App
from runnel.commands import finite
from runnel.exceptions import AccessDenied, RunnelError, StoreFull, TransportError
from runnel.runtime.retry import cancel_and_wait
from runnel.urls import secrets as url_secrets
from runnel_dashboard import api
from runnel_dashboard.access import LOCAL, Access
from runnel_dashboard.actions import ACTIONS, Refused
from runnel_dashboard.audit import Audit
from runnel_dashboard.guard import RequireAccess
from runnel_dashboard.history import History
from runnel_dashboard.jobviews import LISTS, job_list, job_page, job_stats
from runnel_dashboard.sampler import Sampler
from runnel_dashboard.snapshot import hide_password, snapshot

STATIC = files("runnel_dashboard") / "static"
TOKEN_HEADER = "X-Runnel-Token"
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1", "[::1]"]


@dataclass
class Options:
    allow_actions: bool = False
    loopback_only: bool = True
    """Listening on loopback: answer only requests addressed to a loopback name (no DNS
    rebinding); off loopback, actions need credentials."""
    sample_every: float = 5.0
    history_hours: float = 24.0
    """How long the history in the store reaches back (history.py)."""
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    """The page's anti-forgery token (not a credential: the page shows it)."""
    access: Access = field(default_factory=Access)
    audit: Audit = field(default_factory=Audit)


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
        # An executor's figures are as of its last heartbeat (JobExecutor._beat).
        body["executor_beat_every"] = app.settings.job_heartbeat_timeout / 3
        body["allow_actions"] = options.allow_actions
        body["now"] = time.time()
        return JSONResponse(body)

    async def jobs(request: Request) -> Response:
        which = request.query_params.get("list", "recent")
        if which not in LISTS:
            return _error(400, f"list: one of {', '.join(LISTS)}")
        name, queue = request.query_params.get("name"), request.query_params.get("queue")
        try:
            return _json(await job_list(app, which, name, queue))
        except Exception as exc:
            return _error(503, _describe(app, exc))

    async def job(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        try:
            report = await job_page(app, job_id)
        except Exception as exc:
            return _error(503, _describe(app, exc))
        if report is None:
            return _error(404, f"no job with id {job_id!r} in app {app.name}")
        return _json(report)

    async def stats(request: Request) -> Response:
        try:
            return _json(await job_stats(app))
        except Exception as exc:
            return _error(503, _describe(app, exc))

    async def action(request: Request) -> Response:
        name = request.path_params["name"]
        who = getattr(request.state, "who", LOCAL)
        client = request.client.host if request.client else "?"
        args: Any = None
        with contextlib.suppress(Exception):
            args = json.loads(await request.body())
        status, message = await _act(app, options, request, name, args)
        outcome = "done" if status == 200 else "failed" if status == 503 else "refused"
        options.audit.record(who, client, name, args, outcome, message)
        if status != 200:
            return _error(status, message)
        return JSONResponse({"message": message})

    middleware = []
    if options.loopback_only:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=LOOPBACK_NAMES))
    middleware.append(Middleware(RequireAccess, access=options.access))
    return Starlette(
        routes=[
            Route("/", page),
            Route("/api/state", state),
            *api.routes(app, history, options.allow_actions),
            Route("/api/jobs", jobs),
            Route("/api/jobs/{job_id:path}", job),
            Route("/api/job-stats", stats),
            Route("/api/actions/{name:str}", action, methods=["POST"]),
            Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
        ],
        middleware=middleware,
        lifespan=lifespan,
    )


async def _act(
    app: App, options: Options, request: Request, name: str, args: Any
) -> tuple[int, str]:
    """The action's status and line: 200 and what was done, or why not."""
    refused = _refuse(request, options)
    if refused is not None:
        return 403, refused
    handler = ACTIONS.get(name)
    if handler is None:
        return 404, f"no action {name!r} (actions: {', '.join(ACTIONS)})"
    if not isinstance(args, dict):
        return 400, "send the arguments as a JSON object"
    try:
        return 200, await handler(app, args)
    except Refused as exc:
        return exc.status, str(exc)
    except NotFound as exc:
        return 404, str(exc)
    except RunnelError as exc:
        if isinstance(exc, TransportError) and not isinstance(exc, AccessDenied | StoreFull):
            return 503, _describe(app, exc)
        return 409, str(exc)
    except Exception as exc:
        return 503, _describe(app, exc)


def _refuse(request: Request, options: Options) -> str | None:
    """Why this action request is refused, or None to go ahead."""
    if not options.allow_actions:
        return "read-only dashboard: start it with --allow-actions to act"
    if not options.loopback_only and not options.access.required:
        return "actions off loopback need --token or --basic-auth"
    given = request.headers.get(TOKEN_HEADER, "")
    if not secrets.compare_digest(given.encode(), options.token.encode()):
        return "missing or wrong token: use the buttons of the page"
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host')}":
        return "cross-site request refused"
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        return "expected a JSON body"
    return None


def _json(body: Any) -> Response:
    """JSON of what a job carries (arguments, results): what JSON cannot say is shown
    as its repr, a NaN or an infinity (which msgpack carries) too: as a bare ``NaN``
    the browser could not read the page's data at all."""
    text = json.dumps(finite(body), default=repr)
    return Response(text, media_type="application/json", headers={"Cache-Control": "no-store"})


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
    for password in url_secrets(app.settings.redis_url):
        text = text.replace(password, "***")
    return text
