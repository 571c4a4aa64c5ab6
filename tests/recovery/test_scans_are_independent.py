"""A scan carries nothing to the next one in the same process (issue #26 item 6: a recovery report once looked
order-dependent when other scans had run first). The reports of stores of every release, made after reading,
verifying and rebuilding other stores in this process, equal the reports a fresh process makes."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rocketstore_spark.rebuild.output import rebuild_store
from rocketstore_spark.recovery.report import recovery_report
from rocketstore_spark.store.records import read_table
from rocketstore_spark.verify.store import verify_store
from tests.golden.goldens import BY_ID

ROOT = Path(__file__).resolve().parents[2]
REPORTED = ["4.9.8/corrupt-body", "5.1.4/crash-stale", "5.3.3/torn-tail", "5.5.1/zeroed-page"]
BEFORE = ["5.5.1/propcrc", "4.9.8/corrupt-window", "5.3.3/zeroed-page"]

FRESH = """
import json, sys
from rocketstore_spark.recovery.report import recovery_report
print(json.dumps([recovery_report(p)[0] for p in sys.argv[1:]], default=str))
"""


def test_reports_after_other_scans_equal_a_fresh_processs(tmp_path):
    for k, gid in enumerate(BEFORE):
        store = str(BY_ID[gid].store)
        read_table(store)
        verify_store(store)
        rebuild_store(store, tmp_path / f"rebuilt-{k}")
    ours = [json.loads(json.dumps(recovery_report(str(BY_ID[g].store))[0], default=str)) for g in REPORTED]
    proc = subprocess.run([sys.executable, "-c", FRESH, *(str(BY_ID[g].store) for g in REPORTED)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert ours == json.loads(proc.stdout)
