import os

import pytest
from hypothesis import settings

# Hypothesis: "ci" (the default, what `make test` runs) and "dev" (more examples, for a local soak);
# no deadline: a first example may compile or load numba kernels
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", deadline=None, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def spark():
    from rocketstore_spark.spark.session import get_spark
    session = get_spark("rocketstore-tests", master="local[2]")
    yield session
    session.stop()


def pytest_collection_modifyitems(items):
    # Spark tests say so themselves (pytestmark = pytest.mark.spark): `make test-fast` relies on the mark
    unmarked = [item.nodeid for item in items
                if "spark" in getattr(item, "fixturenames", ()) and item.get_closest_marker("spark") is None]
    if unmarked:
        raise pytest.UsageError(f"tests use the spark fixture without @pytest.mark.spark: {unmarked}")


LONG_SECONDS = 30.0                 # a test that takes longer carries @pytest.mark.long (or slow, or spark)


def pytest_terminal_summary(terminalreporter):
    """Names the tests that took over LONG_SECONDS without a mark saying they may: `make test-fast` would
    silently grow slow otherwise. A report, not a failure: how long a test takes depends on the machine."""
    unmarked = []
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", []):
        if report.when == "call" and report.duration > LONG_SECONDS and \
                not {"long", "slow", "spark"} & set(report.keywords):
            unmarked.append(f"{report.duration:.0f} s {report.nodeid}")
    if unmarked:
        terminalreporter.write_sep("-", f"tests over {LONG_SECONDS:.0f} s without a long, slow or spark mark")
        for line in unmarked:
            terminalreporter.write_line(line)
