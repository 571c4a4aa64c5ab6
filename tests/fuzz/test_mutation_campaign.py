"""The mutation campaign (tests/fuzz/campaign.py): thousands of damaged stores through the pure readers in a
memory-limited process (every fifth also through verify, the recovery report, the rebuild and a repair), and a
sample of them through every Spark source."""
from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.fuzz import campaign

ROOT = Path(__file__).resolve().parents[2]
CASES = 2000                # 2-5 minutes on two cores
TOOLS_EVERY = 5             # 400 of them also through verify, report, rebuild and repair (included above)


@pytest.mark.long
def test_campaign_through_the_pure_readers():
    proc = subprocess.run([sys.executable, "-m", "tests.fuzz.campaign", "--cases", str(CASES), "--seed", "20261123",
                           "--memory-gib", "8", "--tools-every", str(TOOLS_EVERY), "--no-fsync"],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    result = json.loads(proc.stdout)
    print(f"mutation campaign: {result['cases']} cases ({result['tool_cases']} through the tools, "
          f"{len(result['refusals'])} repairs refused) in {result['seconds']} s: {result['kinds']}")
    assert result["failures"] == [], json.dumps(result["failures"][:5], indent=1)
    assert proc.returncode == 0 and result["cases"] == CASES


SPARK_SOURCES = ("rocketmq", "rocketmq_segments", "rocketmq_consumequeue", "rocketmq_index", "rocketmq_index_header",
                 "rocketmq_checkpoint", "rocketmq_consumer_offsets")


@pytest.mark.spark
def test_campaign_sample_through_every_spark_source(spark):
    rnd = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        store = campaign.build_store(Path(tmp))
        clean = campaign.clean_reference(store)
        ctx = campaign.Ctx(store, clean, rnd)
        for kind in sorted(campaign.MUTATIONS):
            undo = campaign.Undo()
            try:
                mutation = campaign.MUTATIONS[kind][0](ctx, undo)
                before = campaign.snapshot(store)
                rows, _ = campaign.read_everything(store)
                for source in SPARK_SOURCES:
                    reader = spark.read.format(source)
                    if source.startswith("rocketmq_index"):
                        reader = reader.option("hashSlotNum", str(campaign.HASH_SLOTS))
                    df = reader.load(str(store))
                    if source == "rocketmq":
                        got = sorted(r[0] for r in df.select("physical_offset").collect())
                        assert got == sorted(r["physical_offset"] for r in rows), (kind, mutation)
                    else:
                        df.collect()
                assert campaign.snapshot(store) == before, (kind, mutation)
            finally:
                undo.restore()
