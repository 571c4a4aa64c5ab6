"""A valid consumerOffset.json of 200,000 topic@group pairs for topics the store does not have (issue #26): the
audit reports each check at most ``CAP`` times in full and one finding for the rest, its JSON stays small, and
memory follows the cap, not the file."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rocketstore_spark.findings import CAP
from rocketstore_spark.rocketmq.consumequeue import store_queue_bounds
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.verify.offsets import check_offsets
from tests.golden.goldens import BY_ID
from tests.peak_rss import CLI_WITH_PEAK, reported_peak_mib
from tests.store_files import copy_store

ROOT = Path(__file__).resolve().parents[2]
PAIRS = 200_000


def store_with_offsets(tmp_path) -> Path:
    store = copy_store(BY_ID["5.5.1/consumer-offsets"].store, tmp_path / "store")
    table = {f"GoneTopic{i // 4}@group{i % 4}": {"0": i, "1": i + 1} for i in range(PAIRS // 2)}
    (store / "config" / "consumerOffset.json").write_text(json.dumps({"offsetTable": table}))
    return store


def test_unknown_queues_are_reported_capped_with_every_lag_row_kept(tmp_path):
    layout = discover(str(store_with_offsets(tmp_path)))[0]
    report = check_offsets(layout, store_queue_bounds(layout))
    assert len(report.lags) == PAIRS and {x.status for x in report.lags} == {"unknown_queue"}
    unknown = [f for f in report.findings if f.check == "offsets.unknown_queue"]
    assert len(unknown) == CAP + 1
    summary = unknown[-1]
    assert summary.evidence["omitted"] == PAIRS - CAP
    assert (summary.topic, summary.queue_id) == ("GoneTopic2", 0)         # the 21st pair: entry 10, queue 0
    assert summary.evidence["last_queue_offset"] == PAIRS // 2             # the last pair: GoneTopic24999@group3, 1
    assert "the last at" in summary.message


def test_the_audit_of_it_is_small_and_its_memory_bounded(tmp_path):
    store = store_with_offsets(tmp_path)
    proc = subprocess.run([sys.executable, "-c", CLI_WITH_PEAK, "audit", str(store), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 3, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    findings = doc["stores"][0]["findings"]
    assert sum(f["check"] == "offsets.unknown_queue" for f in findings) == CAP + 1
    assert len(proc.stdout) < 5 << 20                                       # 163 MB before the cap
    peak_mib = reported_peak_mib(proc.stderr)
    assert peak_mib < 1024, f"{peak_mib:.0f} MiB"                          # 1.8 GiB before the cap
