"""Finding the store for a URL: the plugin registered for its scheme builds it."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from runnel.exceptions import Misconfigured, UnknownPlugin
from runnel.plugins.manager import registry
from runnel.plugins.providers import install_hint
from runnel.urls import redact

if TYPE_CHECKING:
    from runnel.settings import Settings
    from runnel.store.backend import Backend


def backend_for(url: str, settings: Settings) -> Backend:
    """Build the store that a plugin registered for ``url``'s scheme."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL": an unclosed [
        raise Misconfigured(f"redis_url {redact(url)!r}: {exc}") from None
    if not parts.scheme or "://" not in url:
        raise Misconfigured(
            f"redis_url {redact(url)!r} has no scheme (write it as redis://host:port/db)"
        )
    try:
        if "," not in parts.netloc:  # a list of hosts (sentinels) is its plugin's to check
            _ = parts.port  # checks it: a port that is not a number raises
    except ValueError as exc:
        raise Misconfigured(f"redis_url {redact(url)!r}: {exc}") from None
    scheme = parts.scheme
    reg = registry()
    if scheme not in reg.names("transport"):
        known = ", ".join(f"{s}://" for s in reg.names("transport")) or "none"
        hint = install_hint("transport", scheme, f"{scheme}://")
        raise UnknownPlugin(
            f"no transport for {scheme}:// URLs; known: {known}" + (f"; {hint}" if hint else "")
        )
    return reg.get("transport", scheme).factory(url, settings)
