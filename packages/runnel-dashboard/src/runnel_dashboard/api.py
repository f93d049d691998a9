"""The read-only JSON of the streams and history views (``/api/streams``,
``/api/history``); the actions their buttons name are served by server.py."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from runnel.app import App
from runnel_dashboard.history import History, bound
from runnel_dashboard.streams import streams_report

SPANS = {"1h": 3600.0, "6h": 6 * 3600.0, "24h": 24 * 3600.0}
"""The spans a chart can show (``/api/history?span=``), capped by the kept span."""


def routes(app: App, history: History, allow_actions: bool) -> list[Route]:
    from runnel_dashboard.server import _describe, _error  # the page's one-line errors

    async def streams(request: Request) -> Response:
        try:
            body = await streams_report(app)
        except Exception as exc:
            return _error(503, _describe(app, exc))
        body["allow_actions"] = allow_actions
        return JSONResponse(body)

    async def samples(request: Request) -> Response:
        span = request.query_params.get("span", "1h")
        if span not in SPANS:
            return _error(400, f"span must be one of {', '.join(SPANS)}")
        now = time.time()
        seconds = min(SPANS[span], history.hours * 3600)
        try:
            found = await history.read(now - seconds)
        except Exception as exc:
            return _error(503, _describe(app, exc))
        return JSONResponse(
            {
                "samples": found,
                "span": seconds,
                "now": now,
                "every": history.every,
                "hours": history.hours,
                "bound": bound(history.every, history.hours),
            }
        )

    return [Route("/api/streams", streams), Route("/api/history", samples)]
