import pytest


@pytest.fixture(scope="session")
def spark():
    from rocketstore_spark.session import get_spark
    session = get_spark("rocketstore-tests", master="local[2]")
    yield session
    session.stop()


def pytest_collection_modifyitems(items):
    for item in items:
        if "/spark/" in str(item.fspath) or "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
