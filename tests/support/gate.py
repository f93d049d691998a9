"""A TCP proxy in front of Redis that stops answering for good at a chosen command.

It passes everything through until a client sends a command containing ``cut_at``
(``b""``: from the start, before any connection). From then on Redis is

* ``closed``: the proxy closes its listening socket and every connection, so clients
  meet a closed port (connection refused); or
* ``hole``: black-holed: connections are still accepted and everything sent is read,
  but nothing is passed on and nothing is ever answered.

Everything clients send is kept per connection, so a test can wait until a command has
reached the proxy (and so is waiting on it), before or after the cut.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Literal

Mode = Literal["closed", "hole"]


class Gate:
    def __init__(self, redis_port: int, cut_at: bytes, mode: Mode) -> None:
        self.target = ("127.0.0.1", redis_port)
        self.cut_at = cut_at
        self.mode = mode
        self.cut = threading.Event()
        self._lock = threading.Lock()
        self._sent: list[bytearray] = []
        self._sockets: list[socket.socket] = []
        self.server = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self.server.getsockname()[1]
        if not cut_at:
            self._cut()
        if not self.cut.is_set() or mode == "hole":
            threading.Thread(target=self._accept, daemon=True).start()

    def url(self, query: str = "") -> str:
        return f"redis://127.0.0.1:{self.port}/0" + (f"?{query}" if query else "")

    def received(self, pattern: bytes) -> int:
        """How many connections have sent something containing ``pattern``."""
        with self._lock:
            return sum(1 for sent in self._sent if pattern in sent)

    def close(self) -> None:
        with self._lock:
            sockets, self._sockets = [self.server, *self._sockets], []
        for s in sockets:
            _shut(s)

    def _cut(self) -> None:
        """Called with the lock held, or before any thread runs."""
        self.cut.set()
        if self.mode == "closed":
            for s in [self.server, *self._sockets]:
                _shut(s)
            self._sockets = []

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = None
            if not self.cut.is_set():
                try:
                    upstream = socket.create_connection(self.target)
                except OSError:
                    client.close()
                    continue
            sent = bytearray()
            opened = [s for s in (client, upstream) if s is not None]
            with self._lock:
                self._sent.append(sent)
                if self.cut.is_set() and self.mode == "closed":
                    for s in opened:  # accepted just as the port closed
                        _shut(s)
                    return
                self._sockets += opened
            threading.Thread(
                target=self._requests, args=(client, upstream, sent), daemon=True
            ).start()
            if upstream is not None:
                threading.Thread(target=self._replies, args=(upstream, client), daemon=True).start()

    def _requests(
        self, client: socket.socket, upstream: socket.socket | None, sent: bytearray
    ) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                with self._lock:
                    sent += data
                    if not self.cut.is_set() and self.cut_at in sent:
                        self._cut()
                    passing = not self.cut.is_set()
                if passing and upstream is not None:
                    upstream.sendall(data)

    def _replies(self, upstream: socket.socket, client: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                if self.cut.is_set():
                    continue  # black-holed: an answer that comes now is never given
                client.sendall(data)


def _shut(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        s.close()
