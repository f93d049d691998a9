"""Stores kept in this process's memory (``memory://``), for tests and single-process apps."""
