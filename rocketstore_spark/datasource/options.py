"""Data source options: one class per source, parsed and validated once on the driver, picklable to executors.

Option names are case-insensitive (Spark lowercases them). An option a source does not know — a typo, an
option of another source — is an error that lists the ones it knows, never silently ignored.
"""
from __future__ import annotations

from dataclasses import dataclass

from rocketstore_spark.codec.properties import DEFAULT_DELAY_LEVELS, parse_delay_levels
from rocketstore_spark.store import multipath
from rocketstore_spark.store.segment_reader import DEFAULT_MAX_RECORD as DEFAULT_MAX_RECORD_SIZE


def _bool(value: str | None, name: str, default: bool) -> bool:
    if value is None or not value.strip():
        return default
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
    """Options every source takes: the store paths (``.load(path)``, or ``paths`` = comma-separated); the
    sources that read the CommitLog also ``storePathCommitLog`` (its directories, comma-separated, as in
    broker.conf: a multi-path CommitLog of the one store given)."""
    paths: tuple[str, ...]
    commitlog_dirs: tuple[str, ...]

    SOURCE = "rocketmq_*"
    KNOWN = ("path", "paths")          # as documented (matched case-insensitively); subclasses add theirs

    def __init__(self, raw, source: str | None = None):
        source = source or self.SOURCE
        opts = {k.lower(): v for k, v in dict(raw).items()}
        known = {k.lower(): k for k in self.KNOWN}
        unknown = sorted(k for k in opts if k not in known)
        if unknown:
            raise ValueError(f"{source}: unknown option(s) {', '.join(unknown)}; "
                             f"the options are: {', '.join(self.KNOWN)}")
        paths = [p for p in (opts.get("path"), opts.get("paths")) if p]
        if not paths:
            raise ValueError(f"{source}: no store given: use .load(path) or .option('paths', 'a,b')")
        object.__setattr__(self, "paths", tuple(p.strip() for p in ",".join(paths).split(",") if p.strip()))
        # the directories of a multi-path CommitLog (sources that read the CommitLog; store.multipath)
        object.__setattr__(self, "commitlog_dirs", tuple(multipath.split(opts.get("storepathcommitlog"))))
        self._parse(opts)

    def _set(self, name: str, value) -> None:
        object.__setattr__(self, name, value)

    def _parse(self, opts: dict) -> None:
        """Subclasses: parse their own options from ``opts`` (lowercased names)."""


@dataclass(frozen=True, init=False)
class CommitLogOptions(Options):
    """``rocketmq``: splitSize, strict, messageDelayLevel, maxRecordSize, batchRows, startOffset, unwrapBatches."""
    split_size: int | None        # None: planning.auto_split_size
    strict: bool
    message_delay_level: str
    max_record_size: int
    batch_rows: int | None        # None: the decoder's default for the requested columns
    start_offset: int             # physical offset a record boundary of every store read: nothing before it is read
    unwrap_batches: bool          # one row per inner message of a 5.x inner batch (codec.inner_batch)

    SOURCE = "rocketmq"
    KNOWN = ("path", "paths", "splitSize", "strict", "messageDelayLevel", "maxRecordSize", "batchRows",
             "startOffset", "storePathCommitLog", "unwrapBatches")

    def _parse(self, opts):
        self._set("split_size", _int(opts.get("splitsize"), "splitSize", None, 4096))
        self._set("strict", _bool(opts.get("strict"), "strict", False))
        self._set("message_delay_level", opts.get("messagedelaylevel") or DEFAULT_DELAY_LEVELS)
        self._set("max_record_size", _int(opts.get("maxrecordsize"), "maxRecordSize", DEFAULT_MAX_RECORD_SIZE, 1024))
        self._set("batch_rows", _int(opts.get("batchrows"), "batchRows", None, 1))
        self._set("start_offset", _int(opts.get("startoffset"), "startOffset", 0, 0))
        self._set("unwrap_batches", _bool(opts.get("unwrapbatches"), "unwrapBatches", False))
        parse_delay_levels(self.message_delay_level)      # fail on the driver, not in an executor


@dataclass(frozen=True, init=False)
class SystemTopicsOptions(Options):
    """``rocketmq_delayed_pending``, ``rocketmq_transactions``, ``rocketmq_retries``: messageDelayLevel and
    rocketmqVersion (the broker's delay table and release; default: detected from the store, else RocketMQ's
    defaults — ``rocketmq.settings.resolve``); storePathCommitLog (a multi-path CommitLog's directories)."""
    message_delay_level: str | None
    rocketmq_version: str | None

    SOURCE = "rocketmq_delayed_pending"
    KNOWN = ("path", "paths", "messageDelayLevel", "rocketmqVersion", "storePathCommitLog")

    def _parse(self, opts):
        self._set("message_delay_level", opts.get("messagedelaylevel") or None)
        self._set("rocketmq_version", opts.get("rocketmqversion") or None)
        if self.message_delay_level:
            parse_delay_levels(self.message_delay_level)      # fail on the driver, not in an executor

    @property
    def settings(self) -> dict:
        """The given settings, as ``rocketmq.settings.resolve`` takes them."""
        return {"messageDelayLevel": self.message_delay_level, "rocketmqVersion": self.rocketmq_version}


@dataclass(frozen=True, init=False)
class SegmentsOptions(Options):
    """``rocketmq_segments``: checkCrc, checkPropertiesCrc (the 5.x ``__CRC32#`` property; default false),
    checkTimes (store times going back or implausible; default false), maxRecordSize."""
    check_crc: bool
    check_properties_crc: bool
    check_times: bool
    max_record_size: int

    SOURCE = "rocketmq_segments"
    KNOWN = ("path", "paths", "checkCrc", "checkPropertiesCrc", "checkTimes", "maxRecordSize", "storePathCommitLog")

    def _parse(self, opts):
        self._set("check_crc", _bool(opts.get("checkcrc"), "checkCrc", True))
        self._set("check_properties_crc", _bool(opts.get("checkpropertiescrc"), "checkPropertiesCrc", False))
        self._set("check_times", _bool(opts.get("checktimes"), "checkTimes", False))
        self._set("max_record_size", _int(opts.get("maxrecordsize"), "maxRecordSize", DEFAULT_MAX_RECORD_SIZE, 1024))


@dataclass(frozen=True, init=False)
class IndexOptions(Options):
    """``rocketmq_index``, ``rocketmq_index_header``: hashSlotNum (the broker's maxHashSlotNum; by default
    inferred per file, store.indexes.resolve_geometry)."""
    hash_slot_num: int | None

    SOURCE = "rocketmq_index"
    KNOWN = ("path", "paths", "hashSlotNum")

    def _parse(self, opts):
        self._set("hash_slot_num", _int(opts.get("hashslotnum"), "hashSlotNum", None, 1))


@dataclass(frozen=True, init=False)
class TimersOptions(Options):
    """``rocketmq_timerlog``, ``rocketmq_timerwheel``, ``rocketmq_timers_pending``: timerPrecisionMs (the
    broker's, default 1000); storePathCommitLog (a multi-path CommitLog's directories)."""
    timer_precision_ms: int

    SOURCE = "rocketmq_timers_pending"
    KNOWN = ("path", "paths", "timerPrecisionMs", "storePathCommitLog")

    def _parse(self, opts):
        self._set("timer_precision_ms", _int(opts.get("timerprecisionms"), "timerPrecisionMs", 1000, 1))
