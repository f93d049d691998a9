"""The Redis key names Runnel uses: part of the public contract (docs/architecture.md)."""

from __future__ import annotations


def partition(app: str, stream: str, number: int) -> str:
    return f"__strm:{app}.{stream}.{number}"


def membership(app: str, stream: str, processor: str) -> str:
    return f"__memb:{app}.{stream}.{processor}"


def control(app: str, stream: str, processor: str) -> str:
    return f"__ctrl:{app}.{stream}.{processor}"


def partition_lock(app: str, stream: str, processor: str, number: int) -> str:
    return f"__lock:{app}.{stream}.{processor}.{number}"


def admin_lock(app: str, stream: str, processor: str) -> str:
    return f"__lock:{app}.{stream}.{processor}.admin"


def heartbeat(app: str, stream: str, processor: str, executor_id: str) -> str:
    return f"__beat:{app}.{stream}.{processor}.{executor_id}"


def leader(app: str) -> str:
    return f"__lead:{app}"


def schemas(app: str, stream: str) -> str:
    return f"__schm:{app}.{stream}"
