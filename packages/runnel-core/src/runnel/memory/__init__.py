"""Stores kept in this process's memory (``memory://``), for tests and single-process
apps. Internal: apps and plugins reach it through its URL, not its modules."""
