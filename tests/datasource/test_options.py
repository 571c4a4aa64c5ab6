"""Options are checked on the driver: a misspelled or foreign option is an error naming the valid ones."""
from __future__ import annotations

import pytest

from rocketstore_spark.datasource.options import CommitLogOptions, IndexOptions, Options, SegmentsOptions


def test_unknown_options_are_rejected_with_the_valid_ones():
    with pytest.raises(ValueError, match=r"rocketmq: unknown option\(s\) splitsise; the options are: path, .*splitSize"):
        CommitLogOptions({"path": "/s", "splitSise": "1"})
    with pytest.raises(ValueError, match=r"rocketmq_checkpoint: unknown option\(s\) hashslotnum"):
        Options({"path": "/s", "hashSlotNum": "64"}, "rocketmq_checkpoint")


def test_each_source_takes_its_own_options():
    assert CommitLogOptions({"path": "/s", "SPLITSIZE": "8192", "strict": "true"}).split_size == 8192
    assert IndexOptions({"path": "/s", "hashslotnum": "64"}).hash_slot_num == 64
    assert SegmentsOptions({"path": "/s", "checkCrc": "false"}).check_crc is False
    assert CommitLogOptions({"paths": "/a, /b"}).paths == ("/a", "/b")


def test_bad_values_fail_on_the_driver():
    with pytest.raises(ValueError, match="splitSize=1: must be at least 4096"):
        CommitLogOptions({"path": "/s", "splitSize": "1"})
    with pytest.raises(ValueError, match="invalid messageDelayLevel"):
        CommitLogOptions({"path": "/s", "messageDelayLevel": "1x"})
    with pytest.raises(ValueError, match="no store given"):
        SegmentsOptions({})
