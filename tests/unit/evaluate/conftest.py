from tests.unit.run.conftest import runs_dir  # noqa: F401  (run dirs written by hand, as serve's tests)
