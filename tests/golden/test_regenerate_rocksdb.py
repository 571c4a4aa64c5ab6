"""``regenerate.py --rocksdb`` still builds and runs RocketMQ's RocksDBMessageStore, and what it writes reads as
RocketMQ sees it: every unit and bound as stored, and the recovery report equal to its real restart.

Marked ``slow`` (Maven, the rocketmq-broker jar, about a minute of RocketMQ runs)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.golden.goldens import GOLDEN_ROOT
from tests.store.test_rocksdb import SCENARIOS, check_restart, check_stored_view


@pytest.mark.slow
def test_rocksdb_regeneration_reads_as_rocketmq_sees_it(tmp_path: Path):
    proc = subprocess.run([sys.executable, str(GOLDEN_ROOT / "regenerate.py"), "--rocksdb", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    fresh = tmp_path / "rocksdb-5.5.1"
    assert sorted(p.name for p in fresh.iterdir()) == sorted(SCENARIOS)
    for scenario in SCENARIOS:
        check_stored_view(scenario, fresh)
        check_restart(scenario, fresh)
