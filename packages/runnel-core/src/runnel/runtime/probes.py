"""Serving ``/healthz`` and ``/readyz`` over HTTP, alone (``--health-port``) or beside
``/metrics`` (``--metrics-port``), from a daemon thread; the standard library only, so a
worker without metrics serves its probes without prometheus_client."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any, Protocol
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from runnel.exceptions import Misconfigured
from runnel.runtime.health import Verdict

Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

LIVE = "/healthz"
READY = "/readyz"


class Probed(Protocol):
    """What answers the probes: one worker's :class:`~runnel.runtime.health.Health`, or a
    supervisor's view of its children."""

    def live(self) -> Verdict: ...

    def ready(self) -> Verdict: ...


def probes_app(probed: Probed, otherwise: Wsgi | None = None) -> Wsgi:
    """A WSGI app answering the two probes, and handing every other path to
    ``otherwise`` (the metrics), else 404."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path not in (LIVE, READY):
            if otherwise is not None:
                return otherwise(environ, start_response)
            return _answer(start_response, "404 Not Found", {"error": "not found"})
        verdict = probed.live() if path == LIVE else probed.ready()
        status = "200 OK" if verdict.ok else "503 Service Unavailable"
        word = ("live" if verdict.ok else "not live") if path == LIVE else None
        word = word or ("ready" if verdict.ok else "not ready")
        body = {"status": word, "reasons": verdict.reasons}
        return _answer(start_response, status, body, environ.get("REQUEST_METHOD") == "HEAD")

    return app


def _answer(
    start_response: Callable[..., Any], status: str, body: dict[str, Any], head: bool = False
) -> list[bytes]:
    data = json.dumps(body).encode() + b"\n"
    start_response(
        status,
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(data))),
            ("Cache-Control", "no-store"),
        ],
    )
    return [] if head else [data]


@dataclass
class Server:
    httpd: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _Threading(ThreadingMixIn, WSGIServer):
    """One thread a request: a slow scraper never holds a probe up."""

    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    """No line per request on stderr: probes come every few seconds."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(app: Wsgi, port: int, host: str, what: str) -> Server:
    """Serve ``app`` on host:port from a daemon thread; ``what`` names it in an error
    (a port in use raises Misconfigured)."""
    try:
        family, address = _family(host, port)

        class Bound(_Threading):
            address_family = family

        httpd = make_server(address, port, app, Bound, handler_class=_Quiet)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise Misconfigured(f"cannot serve {what} on {host}:{port}: {reason}") from None
    except OverflowError:
        raise Misconfigured(f"cannot serve {what} on port {port}: not a valid port") from None
    thread = threading.Thread(target=httpd.serve_forever, name=f"runnel-{what}", daemon=True)
    thread.start()
    return Server(httpd, thread)


def _family(host: str, port: int) -> tuple[socket.AddressFamily, str]:
    """The address family of ``host`` (an IPv6 address or name works too)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, address = infos[0]
    return family, str(address[0])
