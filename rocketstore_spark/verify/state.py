"""Verifying a store's shutdown state: the ``checkpoint`` against what the files hold, the ``abort`` and
``lock`` files (driver or CLI; a few small reads).

The checkpoint records how far the broker had flushed (docs/format/checkpoint.md): the store time of the last
CommitLog record and ConsumeQueue entry flushed, the IndexFile checkpoint, and in 5.x the confirmed and the
dispatched physical offsets. A checkpoint that vouches for more than the files hold means data was lost
after it was flushed (a cut file, a restored older copy), and recovery would start from the wrong place.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from rocketstore_spark.codec import checkpoint
from rocketstore_spark.findings import Finding, finding
from rocketstore_spark.store.files import read_checkpoint
from rocketstore_spark.store.layout import StoreMap


@dataclass(frozen=True)
class LogState:
    """What the CommitLog scan found: the newest record's store time (ms; None without records) and the
    physical offset after the last record."""
    last_store_timestamp: int | None
    end: int


def check_state(files: StoreMap, log: LogState, newest_index_end_timestamp: int | None) -> list[Finding]:
    """Findings about the checkpoint, abort and lock files of a store (a bare CommitLog directory has none)."""
    if files.root is None:
        return []
    root = str(files.root)
    state = read_checkpoint(files)
    out: list[Finding] = []
    if state.abort_present:
        out.append(finding("store.abort_present", "abort", None,
                           "the broker is running or did not shut down cleanly: its next start runs abnormal "
                           "recovery"))
    if state.lock_present:
        out.append(finding("store.lock_present", "lock", None, "lock file present"))
    path = files.checkpoint_path
    size = os.path.getsize(path) if path is not None and os.path.isfile(path) else None
    if state.checkpoint is None or size is None or size < 24:
        out.append(finding("checkpoint.missing", "checkpoint", None,
                           "no checkpoint file" if size is None else f"checkpoint of {size} bytes, 24 at least"))
        return out
    cp = state.checkpoint
    rel = os.path.relpath(path, root)
    newest = log.last_store_timestamp
    for name, position in (("physic_msg_timestamp", 0), ("logics_msg_timestamp", 8)):
        if newest is not None and cp[name] > newest:
            out.append(finding("checkpoint.ahead_of_log", rel, position,
                               f"{name} {cp[name]} is later than the CommitLog's newest record ({newest}, "
                               f"{(cp[name] - newest) / 1000:.3f} s earlier)", checkpoint=cp[name], newest=newest))
    offsets = dict(zip(checkpoint.DTYPE.names, range(0, checkpoint.DTYPE.itemsize, 8)))
    for name in ("confirm_phy_offset", "logics_physical_offset"):
        if size >= offsets[name] + 8 and cp[name] > log.end:
            out.append(finding("checkpoint.ahead_of_log", rel, offsets[name],
                               f"{name} {cp[name]} is beyond the CommitLog's end {log.end}",
                               checkpoint=cp[name], log_end=log.end, physical_offset=log.end))
    if newest_index_end_timestamp is not None and cp["index_msg_timestamp"] > newest_index_end_timestamp:
        out.append(finding("checkpoint.index_ahead", rel, 16,
                           f"index_msg_timestamp {cp['index_msg_timestamp']} is later than the newest IndexFile's "
                           f"end timestamp {newest_index_end_timestamp}", checkpoint=cp["index_msg_timestamp"],
                           index_end=newest_index_end_timestamp))
    return out
