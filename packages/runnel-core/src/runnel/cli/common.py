"""Deprecated: moved to :mod:`runnel.commands`, what a plugin's command uses. Importing
from here works for one release, with a warning."""

import warnings

from runnel.commands import (
    describe,
    failure,
    load,
    load_plugins,
    one_line,
    plugin_option,
    run,
    shown_plain,
    yes_option,
)

__all__ = [
    "describe",
    "failure",
    "load",
    "load_plugins",
    "one_line",
    "plugin_option",
    "run",
    "shown_plain",
    "yes_option",
]

warnings.warn(
    "runnel.cli.common moved to runnel.commands; import from there",
    DeprecationWarning,
    stacklevel=2,
)
