"""The ``checkpoint`` file (docs/format/checkpoint.md): one 4 KiB page of big-endian int64 fields.

     0 physic_msg_timestamp   8 logics_msg_timestamp   16 index_msg_timestamp       (all versions)
    24 master_flushed_offset  32 confirm_phy_offset                                   (5.x)
    40 logics_physical_offset                          (5.5.x, seen in RocketMQ 5.5.1's StoreCheckpoint)

A 4.x broker leaves bytes 24.. zero. Derived as RocketMQ derives them: min_timestamp =
max(0, min(physic, logics) - 3000); min_timestamp_index = min(min_timestamp, index). Pure; numpy only.
"""
from __future__ import annotations

import numpy as np

FILE_SIZE = 4096
DTYPE = np.dtype([("physic_msg_timestamp", ">i8"), ("logics_msg_timestamp", ">i8"), ("index_msg_timestamp", ">i8"),
                  ("master_flushed_offset", ">i8"), ("confirm_phy_offset", ">i8"),
                  ("logics_physical_offset", ">i8")])
RECOVERY_MARGIN_MS = 3000


def decode(buf) -> dict:
    data = bytes(buf[: DTYPE.itemsize]).ljust(DTYPE.itemsize, b"\0")
    rec = np.frombuffer(data, dtype=DTYPE)[0]
    out = {name: int(rec[name]) for name in DTYPE.names}
    out["min_timestamp"] = max(0, min(out["physic_msg_timestamp"], out["logics_msg_timestamp"]) - RECOVERY_MARGIN_MS)
    out["min_timestamp_index"] = min(out["min_timestamp"], out["index_msg_timestamp"])
    return out


def encode(**fields) -> bytes:
    rec = np.zeros(1, dtype=DTYPE)
    for k, v in fields.items():
        rec[k] = v
    return rec.tobytes().ljust(FILE_SIZE, b"\0")
