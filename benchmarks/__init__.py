"""Benchmarks: Runnel against plain redis-py doing the same work, in the same run."""
