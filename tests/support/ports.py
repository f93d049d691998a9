"""Ports for the servers the tests start (redis-servers, cluster nodes, metrics endpoints,
Prometheus), which no other test of the same run can be handed.

A port the kernel picks (bind to port 0) comes from its ephemeral range, the one every
outgoing connection also draws from: two pytest-xdist workers asking at once can both be
handed it, and while a test has a server down to restart it, a client connection may take
its port. So each worker takes its ports in turn from a block of its own, below the
ephemeral range (which starts at 32768 on Linux), and skips any port something already
holds (another checkout's tests, say). A cluster node's bus port (port + 10000) stays
below the ephemeral range too.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
from pathlib import Path
from typing import Any

from runnel.exceptions import Misconfigured
from runnel_redis.embedded import Server, start_server

HOST = "127.0.0.1"
FIRST = 12000
BLOCK = 800
BLOCKS = 12
"""Blocks 12000-21599; with the cluster bus ports, 12000-31599 in all."""
BUS_OFFSET = 10000


def worker_index() -> int:
    """0 without xdist; 1, 2, ... for its workers gw0, gw1, ..."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) + 1 if name.startswith("gw") and name[2:].isdigit() else 0


# A random start, so that two runs at once (two checkouts) seldom probe the same ports.
_turn = itertools.count(random.randrange(BLOCK))


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port(bus: bool = False) -> int:
    """A port of this worker's block that is free now (with ``bus``, port + 10000 too)."""
    first = FIRST + BLOCK * (worker_index() % BLOCKS)
    for _ in range(BLOCK):
        port = first + next(_turn) % BLOCK
        if _bindable(port) and (not bus or _bindable(port + BUS_OFFSET)):
            return port
    raise RuntimeError(f"no free port in {first}-{first + BLOCK - 1}")


def start_redis(directory: Path, **options: Any) -> Server:
    """``start_server`` on a port of this worker's block; on another one if something took
    that port between the probe and the server's bind."""
    for attempt in range(3):
        try:
            return start_server(directory, port=free_port(), **options)
        except Misconfigured:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")
