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
