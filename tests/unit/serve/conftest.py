"""The run directories serve reads, built by hand: tests/unit/run/conftest.py."""

from tests.unit.run.conftest import make_run, runs_dir  # noqa: F401  (fixtures for the serve tests)
