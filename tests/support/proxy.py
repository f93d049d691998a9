"""A TCP proxy in front of Redis that can cut a connection at a chosen moment.

Armed with a byte pattern, it watches what clients send. The next command containing
the pattern is either

* never delivered (``drop_request``): the proxy closes the connection instead, so Redis
  never runs it, as when a connection drops with the command in flight; or
* answered into the void: the proxy reads the reply from Redis and, if it contains
  ``reply_contains``, closes both sides instead of passing it on. Redis has run the
  command but the client never learns what it returned, as when a connection drops with
  the reply in flight.

Either happens once per :meth:`Proxy.arm`.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Proxy:
    def __init__(self, redis_host: str, redis_port: int) -> None:
        self.target = (redis_host, redis_port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}"
        self.pattern: bytes | None = None
        self.reply_contains = b""
        self.drop_request = False
        self.dropped = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, pattern: bytes, reply_contains: bytes = b"", drop_request: bool = False) -> None:
        """Cut the next command containing ``pattern`` (``drop_request``), or its reply
        if the reply contains ``reply_contains``; once."""
        with self._lock:
            self.dropped.clear()
            self.reply_contains = reply_contains
            self.drop_request = drop_request
            self.pattern = pattern

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.server.close()
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            watched = threading.Event()
            threading.Thread(
                target=self._requests, args=(client, upstream, watched), daemon=True
            ).start()
            threading.Thread(
                target=self._replies, args=(upstream, client, watched), daemon=True
            ).start()

    def _requests(self, src: socket.socket, dst: socket.socket, watched: threading.Event) -> None:
        try:
            while data := src.recv(65536):
                with self._lock:
                    hit = self.pattern is not None and self.pattern in data
                    drop = hit and self.drop_request
                    if drop:
                        self.pattern = None
                    elif hit:
                        watched.set()
                if drop:
                    self.dropped.set()
                    return  # finally: both sides closed, the command never delivered
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(src, dst)

    def _replies(self, src: socket.socket, dst: socket.socket, watched: threading.Event) -> None:
        try:
            while data := src.recv(65536):
                if watched.is_set():
                    with self._lock:
                        drop = self.pattern is not None and self.reply_contains in data
                        if drop:
                            self.pattern = None
                    if drop:
                        self.dropped.set()
                        return  # finally: both sides closed, the reply never delivered
                    watched.clear()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(src, dst)


def _close(*sockets: socket.socket) -> None:
    for s in sockets:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            s.close()
