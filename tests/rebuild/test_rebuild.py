"""Rebuilt ConsumeQueues and IndexFiles are byte for byte what RocketMQ itself wrote when it rebuilt them
(golden ``clean/expected-rebuild/``: RocketMQ started on the store with consumequeue/ and index/ emptied)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from rocketstore_spark.codec.encode import Message
from rocketstore_spark.codec.indexfile import Geometry
from rocketstore_spark.rebuild.output import OutputError, rebuild_store
from rocketstore_spark.rocketmq import consumequeue as cq
from rocketstore_spark.rocketmq.settings import resolve
from rocketstore_spark.store.discovery import discover
from tests.builders import write_store
from tests.golden.goldens import all_goldens
from tests.store_files import tree_bytes

CLEAN = [g for g in all_goldens() if g.id.endswith("/clean")]


@pytest.mark.parametrize("g", CLEAN, ids=lambda g: g.id)
@pytest.mark.parametrize("given", [True, False], ids=["settings given", "settings inferred"])
def test_rebuild_is_byte_identical_to_rocketmqs_own(g, given, tmp_path):
    geometry = g.manifest["geometry"]
    options = {"rocketmqVersion": g.manifest["rocketmq_version"],
               "mappedFileSizeConsumeQueue": geometry["mapped_file_size_consume_queue"],
               "maxHashSlotNum": geometry["max_hash_slot_num"], "maxIndexNum": geometry["max_index_num"]}
    result = rebuild_store(str(g.store), tmp_path / "out", options=options if given else None)
    expected = g.store.parent / "expected-rebuild"
    assert tree_bytes(tmp_path / "out" / "consumequeue") == tree_bytes(expected / "consumequeue")
    # IndexFile names are the broker's wall clock at creation: contents are compared in name order
    got = sorted((tmp_path / "out" / "index").iterdir())
    want = sorted((expected / "index").iterdir())
    assert [p.read_bytes() for p in got] == [p.read_bytes() for p in want]
    assert [p.name for p in got] == sorted(p.name for p in got) and not result.findings
    # getMaxOffsetInQueue of every queue RocketMQ reported after its rebuild (it also lists empty queues)
    reported = {(q["topic"], q["queue_id"]): q["max_offset"] for q in g.manifest["rebuild"]["queues"]}
    assert {(q.topic, q.queue_id): q.state.max_offset for q in result.queues} == \
        {k: v for k, v in reported.items() if v > 0}
    # the clean store's own files are what RocketMQ wrote while running: the same, except IndexFile names
    assert {d.status for d in result.differences} == {"identical"}


def test_the_diff_names_the_first_entry_that_differs(tmp_path):
    g = next(g for g in all_goldens() if g.id == "5.5.1/cq-lag-clean")
    result = rebuild_store(str(g.store), tmp_path / "out")
    changed = {d.store_file: d for d in result.differences if d.status != "identical"}
    cut = [s for s in g.manifest["surgery"] if s["action"] == "zero_cq_entries"]
    assert sorted(changed) == sorted(s["file"] for s in cut) and {d.status for d in changed.values()} == {"differs"}
    by_position = {(m["topic"], m["queue_id"], m["queue_offset"]): m for m in g.messages
                   if m["transaction_type"] in (0, 8)}
    for s in cut:
        _, topic, queue_id, name = s["file"].split("/")
        queue_offset = (int(name) + s["file_position"]) // 20
        m = by_position[(topic, int(queue_id), queue_offset)]
        assert changed[s["file"]].detail == (
            f"first difference at queue offset {queue_offset}: store (0, 0, 0), rebuilt ({m['physical_offset']}, "
            f"{m['total_size']}, {m['tags_code']}); {s['entries_removed']} entries differ ({s['entries_removed']} "
            "missing from the store, 0 only in the store, 0 changed)")
    doc = result.document()
    assert (doc["document_type"], doc["document_version"]) == ("rocketstore-spark/rebuild", 2)
    assert doc["mode"] == "release" and doc["restart"]["shutdown"] == "normal" and doc["beyond_release"] == []
    assert doc["settings"]["release"] == doc["rocketmq_version"] == str(result.settings.release)
    assert doc["settings"]["release_family"] == result.settings.release.family.name
    assert doc["settings"]["values"]["mappedFileSizeConsumeQueue"] == result.settings.consume_queue_file_size
    assert doc["settings_sources"] == doc["settings"]["sources"] and doc["records"] == result.records
    assert [d["store_file"] for d in doc["differences"] if d["status"] != "identical"] == sorted(changed)


def test_a_queue_starting_above_zero_gets_fillers_and_gaps_are_closed_up():
    # queue offsets 27, 28, 30 (29 missing: 30 goes to position 29), then 29 (now below the end: a duplicate),
    # with 5-entry files (100 bytes)
    state, files = cq.build_queue([27, 28, 30, 29], [100, 200, 300, 400], [50, 50, 50, 50], [1, 2, 3, 4], 100)
    assert (state.first, state.file_start, state.fillers, state.end) == (27, 500, 2, 30)
    assert (state.written, state.skipped, state.moved) == (3, 1, 1)
    assert [name for name, _ in files] == ["00000000000000000500"]
    entries = np.frombuffer(files[0][1], dtype=cq.ENTRY_DTYPE)
    assert entries["size"].tolist() == [0x7FFFFFFF, 0x7FFFFFFF, 50, 50, 50]
    assert entries["commit_log_offset"].tolist() == [0, 0, 100, 200, 300]    # offset 30's record at position 29


def test_queue_offset_zero_skips_the_logical_checks():
    # a topic deleted and re-created under its name: its offsets start at 0 again; RocketMQ checks duplicates
    # and gaps only for a non-zero QUEUEOFFSET, so the first record of the new life is appended at the end
    state, files = cq.build_queue([0, 1, 2, 0, 1], [100, 200, 300, 400, 500], [50] * 5, [0] * 5, 100)
    assert (state.written, state.skipped, state.moved, state.end) == (4, 1, 1, 4)
    entries = np.frombuffer(files[0][1], dtype=cq.ENTRY_DTYPE)
    assert entries["commit_log_offset"][:4].tolist() == [100, 200, 300, 400]


def test_already_dispatched_records_are_not_written_again():
    state, _ = cq.build_queue([0, 1, 1], [100, 200, 150], [50, 50, 50], [0, 0, 0], 100)
    assert (state.written, state.skipped) == (2, 1)                           # 150 + 50 <= 250


def test_the_output_never_lies_inside_the_store(tmp_path):
    store = CLEAN[0].store
    with pytest.raises(OutputError, match="inside the store"):
        rebuild_store(str(store), store / "rebuilt")
    with pytest.raises(OutputError, match="inside the store"):
        rebuild_store(str(store), store)
    link = tmp_path / "innocent"
    os.symlink(store / "config", link)
    with pytest.raises(OutputError, match="inside the store"):
        rebuild_store(str(store), link)
    (tmp_path / "used" / "index").mkdir(parents=True)
    with pytest.raises(OutputError, match="already exists"):
        rebuild_store(str(store), tmp_path / "used")


def test_a_topic_that_cannot_be_a_directory_is_reported_and_the_rest_rebuilt(tmp_path):
    write_store(tmp_path / "store" / "commitlog", [Message("..", b"x"), Message("T", b"y"), Message("a/b", b"z"),
                                                   Message("bell\x07", b"w")])
    result = rebuild_store(str(tmp_path / "store"), tmp_path / "out", options={"messageIndexEnable": False})
    assert sorted(os.listdir(tmp_path / "out" / "consumequeue")) == ["T"]
    assert sorted(f.message.split(" cannot")[0] for f in result.findings if f.check == "rebuild.unsafe_topic") == \
        ["topic '..'", "topic 'a/b'", "topic 'bell\\x07'"]
    assert not (tmp_path / "out" / "index").exists()                      # messageIndexEnable=false


def test_broker_conf_settings_and_conflicts_with_what_the_files_show(tmp_path):
    from rocketstore_spark.codec.broker_conf import parse_properties, store_settings
    from rocketstore_spark.rebuild.output import SettingsConflict
    props = parse_properties(
        "# broker.conf\n"
        "brokerName=b1\n"
        "maxHashSlotNum = 128\n"
        "! note\n"
        "maxIndexNum:512\n"
        "messageDelayLevel=1s 5s \\\n"
        "   10s\n"
        "messageIndexEnable=TRUE\n")
    assert store_settings(props) == {"maxHashSlotNum": 128, "maxIndexNum": 512, "messageIndexEnable": True,
                                     "messageDelayLevel": "1s 5s 10s"}
    conf = tmp_path / "broker.conf"
    conf.write_text("maxHashSlotNum=128\nmaxIndexNum=512\n")
    store = CLEAN[0].store                       # its IndexFiles have 64 slots x 256 entries
    with pytest.raises(SettingsConflict, match="maxHashSlotNum=128 .*broker.conf.* IndexFiles have 64"):
        rebuild_store(str(store), tmp_path / "out", broker_conf=str(conf))
    with pytest.raises(SettingsConflict, match=r"mappedFileSizeConsumeQueue=6000000 \(option\) but .* 500 bytes"):
        rebuild_store(str(store), tmp_path / "out", options={"mappedFileSizeConsumeQueue": 6_000_000})
    result = rebuild_store(str(store), tmp_path / "out", broker_conf=str(conf), allow_conflicts=True)
    assert result.settings.geometry == Geometry(128, 512) and result.settings.sources["maxHashSlotNum"].startswith("broker.conf")


def test_options_given_as_text_are_typed_as_broker_conf_values():
    """Options often come as text (job arguments, a scheduler's parameters): "64" is the 64 the files show,
    not a conflict, and the geometry is built from numbers."""
    layout = discover(str(CLEAN[0].store))[0]            # IndexFiles of 64 slots x 256 entries
    as_text = resolve(layout, {"maxHashSlotNum": "64", "maxIndexNum": " 256 ", "messageIndexEnable": "TRUE"})
    assert as_text.conflicts == [] and as_text.geometry == Geometry(64, 256)
    assert resolve(layout, {"maxHashSlotNum": "128"}).conflicts == \
        ["maxHashSlotNum=128 (option) but the store's IndexFiles have 64"]
    with pytest.raises(ValueError, match="maxIndexNum='x' is not an integer"):
        resolve(layout, {"maxIndexNum": "x"})


@pytest.mark.parametrize("g", CLEAN[:1], ids=lambda g: g.id)
def test_consumequeue_entries_written_as_they_come_are_the_same_bytes(g, tmp_path, monkeypatch):
    # batches of 7 records and nothing held back: every batch's runs are written at once, each queue's files
    # opened again and again, a queue's first run (its fillers) and later runs in separate writes
    from functools import partial

    from rocketstore_spark.rebuild import output
    monkeypatch.setattr(output, "HELD_BYTES", 0)
    monkeypatch.setattr(output, "DispatchDecoder", partial(output.DispatchDecoder, batch_rows=7))
    rebuild_store(str(g.store), tmp_path / "out")
    assert tree_bytes(tmp_path / "out" / "consumequeue") == tree_bytes(g.store.parent / "expected-rebuild" / "consumequeue")


def test_a_failed_rebuild_leaves_no_tree_and_an_unknown_release_is_said(tmp_path, monkeypatch):
    from rocketstore_spark.rebuild.output import IndexWriter
    store = CLEAN[1].store

    def failing(self):                        # the ConsumeQueue files are complete by now, IndexFiles begun
        assert any((tmp_path / "out" / "consumequeue").rglob("0*"))
        assert any((tmp_path / "out" / "index").rglob(".*.tmp"))
        raise OSError("disk full")

    monkeypatch.setattr(IndexWriter, "close", failing)
    with pytest.raises(OSError, match="disk full"):
        rebuild_store(str(store), tmp_path / "out")
    assert os.listdir(tmp_path / "out") == []
    monkeypatch.undo()
    result = rebuild_store(str(store), tmp_path / "out2", options={"rocketmqVersion": "6.1.0"}, allow_conflicts=True)
    assert "outside the releases these rules were read from" in result.settings.sources["rocketmqVersion"]


def test_an_index_file_cut_short_differs_from_the_rebuild(tmp_path):
    g = next(g for g in all_goldens() if g.id == "4.9.8/index-truncated")
    result = rebuild_store(str(g.store), tmp_path / "out")
    changed = [d for d in result.differences if d.status != "identical"]
    assert [(d.kind, d.status) for d in changed] == [("index", "differs")]
    assert changed[0].detail.startswith("sizes differ (store 2708 bytes, rebuilt 5416)")


@pytest.mark.parametrize("g", CLEAN, ids=lambda g: g.id)
def test_the_release_a_person_reads_is_what_the_store_can_tell(g):
    """Index keys tell 5.4.0+ from earlier 5.x, 5.x-only files tell 5.x from 4.x: the label never claims more."""
    label = resolve(discover(str(g.store))[0]).release_label
    version = tuple(int(x) for x in g.version.split("."))
    want = "4.x" if version < (5,) else "5.x, before 5.4.0" if version < (5, 4) else "5.4.0 or later"
    assert label == want
    assert resolve(discover(str(g.store))[0], {"rocketmqVersion": g.version}).release_label == g.version
