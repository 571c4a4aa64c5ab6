"""Property test of the repair (Hypothesis) over stores from our encoder under any broker geometry (segment,
ConsumeQueue and IndexFile sizes, release): a store that crashed — and perhaps has a body byte flipped or its
last record torn — is planned and applied into a copy; the apply never fails, the store is untouched, the
copy keeps every record below the end of the log byte for byte and nothing after it, verifies without a
problem in its ConsumeQueues, IndexFiles or checkpoint, and its own recovery report cuts and loses nothing.

The golden tests (test_apply.py) show the same against real RocketMQ; this shows it is not tied to the golden
stores' configuration."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore_spark.checks import CHECKS, RECORDS, Severity
from rocketstore_spark.codec import checkpoint
from rocketstore_spark.recovery.apply import apply_plan
from rocketstore_spark.recovery.plan import make_plan
from rocketstore_spark.recovery.report import harmful, recovery_report
from rocketstore_spark.verify.store import verify_store
from tests.store_files import tree
from tests.verify.test_verify_properties import build, store_specs

EXAMPLES = int(os.environ.get("APPLY_EXAMPLES", "0")) or None


def log_bytes(store) -> bytes:
    """The CommitLog as one byte string, segments in offset order (they are contiguous in these stores)."""
    return b"".join(p.read_bytes() for p in sorted((store / "commitlog").iterdir()))


@settings(max_examples=EXAMPLES or 20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=store_specs(), damage=st.sampled_from(["crash", "flip", "torn"]), where=st.floats(0, 1, exclude_max=True),
       stale=st.booleans())
def test_a_crashed_store_is_repaired_into_a_copy_that_starts_cleanly(tmp_path_factory, spec, damage, where, stale):
    work = tmp_path_factory.mktemp("apply")
    store, options = build(work, spec)
    log = log_bytes(store)
    records = []                                  # (physical offset, total size) of every record, in order
    pos = 0
    while pos + 8 <= len(log) and int.from_bytes(log[pos + 4:pos + 8], "big", signed=True) in (-626843481, -626843477):
        size = int.from_bytes(log[pos:pos + 4], "big")
        records.append((pos, size))
        pos += size
        if pos % spec["segment_size"] and pos + 8 <= len(log) and \
                int.from_bytes(log[pos + 4:pos + 8], "big", signed=True) not in (-626843481, -626843477):
            pos += spec["segment_size"] - pos % spec["segment_size"]          # a BLANK: the next segment
    # the crash: an abort file, and a checkpoint as of the last record or (stale) as of long before it
    (store / "abort").write_bytes(b"")
    if stale:
        (store / "checkpoint").write_bytes(checkpoint.encode(physic_msg_timestamp=1, logics_msg_timestamp=1,
                                                             index_msg_timestamp=1))
    phy, size = records[int(where * len(records))]
    segment = store / "commitlog" / f"{phy - phy % spec['segment_size']:020d}"
    data = bytearray(segment.read_bytes())
    at = phy % spec["segment_size"]
    if damage == "flip":                          # the record's last byte: its body's, or its properties'
        data[at + size - 1] ^= 0x5A
    elif damage == "torn":
        phy, size = records[-1]
        segment = store / "commitlog" / f"{phy - phy % spec['segment_size']:020d}"
        data = bytearray(segment.read_bytes())
        at = phy % spec["segment_size"]
        data[at + size // 2:at + size] = bytes(size - size // 2)
    segment.write_bytes(bytes(data))
    before = tree(store)

    plan = make_plan(str(store), work / "plan", options=options)
    receipt = apply_plan(work / "plan", output=work / "repaired")
    assert tree(store) == before and receipt["phase"] == "applied"

    po = plan["process_offset"]
    repaired = work / "repaired"
    kept = log_bytes(repaired)
    now = log_bytes(store)
    assert kept[:po] == now[:po] and not any(kept[po:])
    doc, _ = recovery_report(str(repaired), options=options)
    assert doc["shutdown"] == "normal" and doc["process_offset"] == po and not harmful(doc)
    v = verify_store(str(repaired), options=options)
    # damage the repair keeps (older than any start walks: RocketMQ never reads it) stays a CommitLog finding
    wrong = [f.render() for f in v.findings if f.severity != Severity.INFO and CHECKS[f.check].area != RECORDS]
    assert wrong == []
