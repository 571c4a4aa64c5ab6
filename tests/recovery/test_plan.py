"""The repair plan: the messages a restart would lose are exported byte for byte (RocketMQ's own records, the
manifests), the actions follow the recovery report, and the store is untouched."""
from __future__ import annotations

import hashlib
import json

import pyarrow.parquet as pq
import pytest

from rocketstore_spark.recovery.plan import make_plan
from rocketstore_spark.store.outputs import OutputError
from tests.golden.goldens import BY_ID


def files(root):
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("gid", ["4.9.8/corrupt-body", "5.1.4/torn-tail", "5.5.1/corrupt-body", "5.5.1/clean",
                                 "4.9.8/crash", "4.9.8/corrupt-window", "5.5.1/zeroed-page"])
def test_the_plan_exports_what_the_restart_would_lose_and_leaves_the_store_alone(gid, tmp_path):
    g = BY_ID[gid]
    before = files(g.store)
    plan = make_plan(str(g.store), tmp_path / "plan")
    assert files(g.store) == before
    assert json.loads((tmp_path / "plan" / "plan.json").read_text())["actions"] == plan["actions"]
    po = g.manifest["recovery"]["commitlog_max_offset"]
    assert plan["process_offset"] == po
    lost = [m for m in g.records_on_disk if m["physical_offset"] >= po and m["body_crc_ok"]]
    table = pq.read_table(tmp_path / "plan" / "lost-messages.parquet")
    assert sorted(table["physical_offset"].to_pylist()) == sorted(m["physical_offset"] for m in lost)
    by_offset = {m["physical_offset"]: m for m in lost}
    for phy, body, topic in zip(table["physical_offset"].to_pylist(), table["body"].to_pylist(),
                                table["topic"].to_pylist()):
        assert hashlib.sha256(body).hexdigest() == by_offset[phy]["body_sha256"] and topic == by_offset[phy]["topic"]
    kinds = [a["action"] for a in plan["actions"]]
    stop = plan["report"]["stop"]
    tail = (g.store / stop["file"]).read_bytes()[stop["file_position"]:] if stop["file"] else b""
    assert kinds[0] == "export"
    assert ("cut" in kinds) == bool(lost or plan["report"]["commitlog_bytes_cut"] or tail.strip(b"\0"))
    if "cut" in kinds:
        cut = next(a for a in plan["actions"] if a["action"] == "cut")
        assert cut["file"] in plan["checksums"] and cut["at"] == plan["report"]["stop"]["file_position"]
    assert (kinds[-1] == "remove") == g.manifest["abort_present"]


def test_a_plan_is_never_written_into_the_store_nor_over_another(tmp_path):
    g = BY_ID["5.5.1/torn-tail"]
    with pytest.raises(OutputError, match="inside the store"):
        make_plan(str(g.store), g.store / "plan")
    make_plan(str(g.store), tmp_path / "p")
    with pytest.raises(OutputError, match="already exists"):
        make_plan(str(g.store), tmp_path / "p")
