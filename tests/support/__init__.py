"""Helpers shared by the tests (imported by test modules and conftests; never collected).

Fixtures that several folders need are defined here too and registered by the conftest
of each folder that uses them; see tests/README.md."""
