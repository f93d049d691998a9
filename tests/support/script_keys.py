"""Every key a Lua script touches must be one of the keys it was given (KEYS): ElastiCache
Serverless refuses a script that touches any other, and a Redis Cluster only when the other
key is in another slot, which the tests' keys seldom are.

Watched on the real server, not read from the Lua: under ``--check-script-keys`` the
session's server is watched with MONITOR during each test, which shows every command a
script runs (as client ``lua``) right after the EVALSHA that ran it, scripts being atomic.
Each such command's keys are what the server itself says they are (COMMAND GETKEYS), so a
key name built in the script from ARGV or from what it read is caught however it was
built. What no test runs is not checked: the suites run every script.
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass, field

import redis

from runnel_redis import scripts

LINE = re.compile(r"^\S+ \[\d+ (\S+)\] (.*)$")
ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')
ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b", '"': '"', "\\": "\\"}
SCRIPTS = ("eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro")


def _unescape(text: str) -> bytes:
    out = bytearray()
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "x":
                out.append(int(text[i + 2 : i + 4], 16))
                i += 4
                continue
            out += ESCAPES.get(nxt, nxt).encode()
            i += 2
            continue
        out += char.encode()
        i += 1
    return bytes(out)


def _names() -> dict[str, str]:
    """The SHA1 of each script constant of runnel_redis.scripts, to its name."""
    found = {}
    for name in dir(scripts):
        value = getattr(scripts, name)
        if isinstance(value, str) and "redis.call" in value:
            for text in (value, scripts.plain(value)):
                found[hashlib.sha1(text.encode()).hexdigest()] = name
    return found


@dataclass
class Watch:
    """MONITOR on one server from :meth:`start` to :meth:`stop`; :meth:`undeclared`."""

    url: str
    lines: list[str] = field(default_factory=list)

    def start(self) -> None:
        self._client = redis.Redis.from_url(self.url)
        self._monitor = self._client.monitor().__enter__()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        # An ECHO through the watched server marks the moment MONITOR is in place.
        marker = redis.Redis.from_url(self.url)
        marker.echo("script-keys-watch")
        marker.close()
        while not any("script-keys-watch" in line for line in list(self.lines)):
            if not self._thread.is_alive():
                raise RuntimeError("MONITOR ended at once")
            threading.Event().wait(0.01)

    def _read(self) -> None:
        try:
            while True:
                response = self._monitor.connection.read_response()
                self.lines.append(response.decode("utf-8", "backslashreplace"))
        except (redis.RedisError, OSError, AttributeError, ValueError):
            return

    def stop(self) -> None:
        # A last command, seen once every command before it was.
        marker = redis.Redis.from_url(self.url)
        marker.echo("script-keys-done")
        marker.close()
        while not any("script-keys-done" in line for line in list(self.lines)):
            if not self._thread.is_alive():
                break
            threading.Event().wait(0.01)
        self._monitor.connection.disconnect()
        self._thread.join(5)
        self._client.close()

    def undeclared(self) -> list[str]:
        """One line per command a script ran on a key it was not given."""
        names = _names()
        client = redis.Redis.from_url(self.url)
        seen: set[str] = set()
        out: list[str] = []
        declared: set[bytes] = set()
        script = ""
        try:
            for line in self.lines:
                match = LINE.match(line)
                if match is None:
                    continue
                who, rest = match.groups()
                args = [_unescape(a) for a in ARG.findall(rest)]
                if not args:
                    continue
                if who != "lua":
                    if args[0].decode().lower() in SCRIPTS and len(args) > 2:
                        count = int(args[2])
                        declared = set(args[3 : 3 + count])
                        sha = args[1].decode()
                        if args[0].decode().lower().startswith("eval") and len(sha) != 40:
                            sha = hashlib.sha1(args[1]).hexdigest()
                        script = names.get(sha, sha[:12])
                    continue
                for key in set(_keys(client, args)) - declared:
                    text = f"{script}: {args[0].decode().upper()} on {key!r} (not in KEYS)"
                    if text not in seen:
                        seen.add(text)
                        out.append(text)
        finally:
            client.close()
        return out


def _keys(client: redis.Redis, args: list[bytes]) -> list[bytes]:
    try:
        found = client.command_getkeys(*args)  # redis-py decodes them
    except redis.ResponseError:
        return []  # a command without keys (TIME)
    return [k.encode() if isinstance(k, str) else k for k in found]
