"""Data source options, parsed and validated once (driver), picklable to the workers."""
from __future__ import annotations

from dataclasses import dataclass

from rocketstore_spark.codec.columns import DEFAULT_DELAY_LEVELS



def _bool(value: str | None, name: str) -> bool:
    if value is None:
        return False
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"option {name}={value!r}: expected true or false")


def _int(value: str | None, name: str, default: int | None, minimum: int) -> int | None:
    if value is None:
        return default
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"option {name}={value!r}: expected an integer") from None
    if n < minimum:
        raise ValueError(f"option {name}={n}: must be at least {minimum}")
    return n


@dataclass(frozen=True)
class Options:
    paths: tuple[str, ...]
    split_size: int | None        # None: planning.auto_split_size
    strict: bool
    message_delay_level: str
    max_record_size: int
    hash_slot_num: int
    check_crc: bool
    batch_rows: int | None        # None: batches.batch_limits

    def __init__(self, raw):
        opts = {k.lower(): v for k, v in dict(raw).items()}
        paths = [p for p in (opts.get("path"), opts.get("paths")) if p]
        if not paths:
            raise ValueError("no store given: use .load(path) or .option('paths', 'a,b')")
        object.__setattr__(self, "paths", tuple(p.strip() for p in ",".join(paths).split(",") if p.strip()))
        object.__setattr__(self, "split_size", _int(opts.get("splitsize"), "splitSize", None, 4096))
        object.__setattr__(self, "strict", _bool(opts.get("strict"), "strict"))
        object.__setattr__(self, "message_delay_level", opts.get("messagedelaylevel") or DEFAULT_DELAY_LEVELS)
        object.__setattr__(self, "max_record_size", _int(opts.get("maxrecordsize"), "maxRecordSize", 64 << 20, 1024))
        object.__setattr__(self, "hash_slot_num", _int(opts.get("hashslotnum"), "hashSlotNum", 5_000_000, 1))
        object.__setattr__(self, "batch_rows", _int(opts.get("batchrows"), "batchRows", None, 1))
        object.__setattr__(self, "check_crc", not opts.get("checkcrc") or _bool(opts.get("checkcrc"), "checkCrc"))
        from rocketstore_spark.codec.columns import parse_delay_levels
        parse_delay_levels(self.message_delay_level)      # fail on the driver, not in a worker
