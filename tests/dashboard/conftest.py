"""The ``browser`` fixture (headless Chromium) of tests/support/dashboard.py."""

from tests.support.dashboard import browser  # noqa: F401 (a fixture, registered by name)
