"""``rocketmq_dledger_index`` and ``rocketmq_dledger_checkpoint`` on RocketMQ 5.5.1's DLedger golden store: every
index unit DLedger wrote, as DLedger's own get(index) describes its entry, and the checkpoint's indexes."""
from __future__ import annotations

import json

import pytest

from tests.golden.goldens import BY_ID, GOLDEN_ROOT

pytestmark = pytest.mark.spark
DLEDGER = GOLDEN_ROOT / "dledger-5.5.1" / "clean"


def test_the_dledger_tables_are_dledgers_view(spark):
    manifest = json.loads((DLEDGER / "manifest.json").read_text())
    units = spark.read.format("rocketmq_dledger_index").load(str(DLEDGER / "store")).orderBy("unit").collect()
    assert [(u.entry_index, u.term, u.pos, u.size, u.magic) for u in units] == \
           [(e["index"], e["term"], e["pos"], e["size"], e["magic"]) for e in manifest["entries"]]
    assert {(u.self_id, u.file) for u in units} == {("n0", "dledger-n0/index/00000000000000000000")}
    assert all(u.unit == u.entry_index and u.file_position == 32 * u.unit for u in units)
    (cp,) = spark.read.format("rocketmq_dledger_checkpoint").load(str(DLEDGER / "store")).collect()
    assert (cp.self_id, str(cp.end_index), str(cp.committed_index), cp.checkpoint_present) == \
           ("n0", manifest["dledger_checkpoint"]["endIndex"], manifest["dledger_checkpoint"]["committedIndex"], True)
    assert cp.vote_leader == "n0" and cp.current_term == manifest["ledger_after_load"]["ledgerEndTerm"]
    classic = str(BY_ID["5.5.1/clean"].store)
    assert spark.read.format("rocketmq_dledger_checkpoint").load(classic).count() == 0
