"""An example Runnel plugin, found only through its ``runnel`` entry point."""

from importlib.metadata import version

__version__ = version("runnel-example-plugin")
