from tests.unit.serve.conftest import runs_dir  # noqa: F401  (run dirs written by hand, as serve's tests)
