"""The ``spawn`` fixture (tests/process/test_memory.py) for the mapping tests."""

from tests.process.test_memory import spawn  # noqa: F401  (fixture)
