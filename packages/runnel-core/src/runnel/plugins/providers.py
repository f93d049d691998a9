"""Which of Runnel's own packages provides which name, so that asking for a name whose
package is not installed says what to install instead of only listing what is there."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Provider:
    """One of Runnel's packages (or an extra of runnel-core) and how to install it."""

    what: str
    """How the message names it: ``the runnel-avro plugin``."""
    extra: str
    """The extra of the ``runnel`` umbrella distribution that brings it."""
    checkout: str
    """What to give ``pip install -e`` in a checkout of this repository."""
    verb: str = "comes with"

    def hint(self, subject: str) -> str:
        return (
            f"{subject} {self.verb} {self.what}, which is not installed: install "
            f"runnel[{self.extra}] (from a checkout: pip install -e {self.checkout})"
        )


def _plugin(name: str, needs: str = "") -> Provider:
    """``needs``: another member it requires, installed in the same command (pip would
    look for it on the index otherwise, where no runnel-* package is published)."""
    first = f"packages/{needs} -e " if needs else ""
    return Provider(f"the runnel-{name} plugin", name, f"{first}packages/runnel-{name}")


def _core_extra(extra: str, library: str) -> Provider:
    return Provider(f"the {library} package", extra, f'"packages/runnel-core[{extra}]"', "needs")


_REDIS = _plugin("redis")

PROVIDERS: dict[tuple[str, str], Provider] = {
    ("serializer", "avro"): _plugin("avro"),
    ("compressor", "zstd"): _core_extra("zstd", "zstandard"),
    ("compressor", "lz4"): _core_extra("lz4", "lz4"),
    ("command", "avro"): _plugin("avro"),
    ("command", "spark"): _plugin("spark", needs="runnel-redis"),
    ("command", "dashboard"): _plugin("dashboard"),
    **{
        ("transport", scheme): _REDIS
        for scheme in (
            "redis",
            "rediss",
            "unix",
            "redis+embedded",
            "redis+cluster",
            "rediss+cluster",
            "redis+sentinel",
            "rediss+sentinel",
        )
    },
}
"""(kind, name) -> what provides it, for every name one of Runnel's packages registers."""


def install_hint(kind: str, name: str, subject: str | None = None) -> str | None:
    """``<subject> comes with X, which is not installed: install ...`` for a name one of
    Runnel's packages provides; ``None`` for any other name."""
    provider = PROVIDERS.get((kind, name))
    if provider is None:
        return None
    return provider.hint(subject or f"{kind} {name!r}")
