"""Fixtures of the job tests: ``store_url`` (memory:// and Redis, tests/support/apps.py),
``redis_job_store`` (tests/support/job_hashes.py) and the unit tests' ``app`` that never
connects (tests/support/units.py)."""

from tests.support.apps import store_url  # noqa: F401 (fixtures, registered by name)
from tests.support.job_hashes import redis_job_store  # noqa: F401
from tests.support.units import app  # noqa: F401
