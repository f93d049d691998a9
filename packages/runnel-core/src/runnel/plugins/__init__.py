"""Runnel's plugin system (pluggy, project name ``runnel``).

Hook specifications live in :mod:`runnel.plugins.hookspecs`; plugins mark their
implementations with :data:`hookimpl` and are found through the ``runnel`` entry-point
group, ``App(plugins=[...])`` or ``runnel worker --plugin MODULE``.
"""

import pluggy

hookimpl = pluggy.HookimplMarker("runnel")

__all__ = ["hookimpl"]
