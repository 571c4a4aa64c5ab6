"""``regenerate.py --rocksdb`` still builds and runs RocketMQ's RocksDBMessageStore, and what it writes reads as
RocketMQ sees it: every unit and bound as stored, and the recovery report equal to its real restart.

Marked ``slow`` (Maven, the rocketmq-broker jar, about a minute of RocketMQ runs). The regeneration runs beside
the other tests (tests/golden/conftest.py)."""
from __future__ import annotations

import pytest

from tests.store.test_rocksdb import SCENARIOS, check_restart, check_stored_view


@pytest.mark.slow
def test_rocksdb_regeneration_reads_as_rocketmq_sees_it(regeneration):
    # regenerate.py --rocksdb --out DIR, run in the background of the other tests (tests/golden/conftest.py)
    proc, out = regeneration
    assert proc.returncode == 0, proc.stderr[-4000:]
    fresh = out / "rocksdb-5.5.1"
    assert sorted(p.name for p in fresh.iterdir()) == sorted(SCENARIOS)
    for scenario in SCENARIOS:
        check_stored_view(scenario, fresh)
        check_restart(scenario, fresh)
