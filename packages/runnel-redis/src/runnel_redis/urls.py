"""Cluster URLs as redis-py takes them: a module of its own, so that the cluster transport
and the partition logs (cluster_log.py, which the transport imports) both reach it."""

from __future__ import annotations


def client_url(url: str) -> str:
    """The URL redis-py's cluster client takes: ``redis+cluster://`` as ``redis://``."""
    scheme, rest = url.split("://", 1)
    return scheme.lower().removesuffix("+cluster") + "://" + rest
