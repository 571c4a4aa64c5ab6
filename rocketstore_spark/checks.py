"""The catalogue of checks: every kind of finding the toolkit reports, with its severity, the rule, what
RocketMQ itself does in that situation and what to do about it.

This is the one place a check id is defined. ``findings.finding`` refuses an id that is not here, and
``docs/checks.md`` is generated from this table (``python -m rocketstore_spark.checks > docs/checks.md``;
a test keeps the two equal). A new check: add an entry here, emit it with ``findings.finding``, regenerate
the document. Pure data; imported everywhere (driver and executors).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Severity(str, Enum):
    """How bad a finding is. ``error``: data is damaged, missing or inconsistent; ``warning``: unusual but
    readable (or recovered by the reader); ``info``: worth knowing."""
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Check:
    id: str                 # "area.name", stable: jobs, dashboards and Delta tables key on it
    severity: Severity
    area: str               # section of the catalogue
    rule: str               # what is checked
    rocketmq: str           # what RocketMQ does in this situation (docs/format/ section)
    action: str             # what our readers do, and the repair to consider


_E, _W, _I = Severity.ERROR, Severity.WARNING, Severity.INFO
RECORDS = "CommitLog records"
LAYOUT = "Store layout"
QUEUES = "ConsumeQueues"
BATCH_QUEUES = "BatchConsumeQueues"
INDEX = "IndexFiles"
STATE = "Checkpoint and shutdown state"
OFFSETS = "Consumer offsets"
REBUILD = "Rebuild"
TIMERS = "Timer files (5.x timerWheelEnable)"

CATALOGUE: tuple[Check, ...] = (
    Check("commitlog.bad_magic", _E, RECORDS,
          "the int32 at record + 4 is neither `0xDAA320A7`, `0xDAA320AB` nor BLANK `0xCBD43194` (and the record "
          "is not all zero)",
          "recovery stops there; everything after is truncated and later segments deleted "
          "(docs/format/recovery.md)",
          "finding at the record start; the reader resynchronises on the next record start and reads on"),
    Check("commitlog.bad_length", _E, RECORDS,
          "TOTALSIZE below the smallest possible record (91 bytes) or beyond the end of the file",
          "4.9.x: an exception ends the recovery walk; 5.3.2+: a bounds check ends it "
          "(docs/format/recovery.md)",
          "finding; resynchronise"),
    Check("commitlog.length_mismatch", _E, RECORDS,
          "BODYLENGTH, TOPICLENGTH and PROPERTIESLENGTH do not add up to TOTALSIZE (a torn or overwritten record)",
          "recovery stops (a \"half message\"); the dispatcher skips the record (docs/format/commitlog.md)",
          "finding; resynchronise"),
    Check("commitlog.bad_entry", _E, RECORDS,
          "a DLedger entry (`dledger-*/data/`) whose 48-byte header does not frame its record: size not "
          "48 + body length, the record not filling the body, the zero size of a non-zero magic, or the entry's pos "
          "not the record's PHYSICALOFFSET - 48 (docs/format/dledger.md); a bad entry magic is `commitlog.bad_magic`, "
          "an impossible entry size `commitlog.bad_length`",
          "DLedger's recovery (`DLedgerMmapFileStore.recover`) stops at the first entry whose magic, size, body "
          "length, pos, index or term does not check and truncates the data and index files there",
          "finding at the entry start with its magic, size, index, term and pos; the reader resynchronises on the "
          "next entry start and reads on"),
    Check("commitlog.beyond_divide", _W, LAYOUT,
          "a classic `commitlog/` segment of a DLedger store at or past `dividedCommitlogOffset` (the base offset of "
          "the first DLedger data file)",
          "DLedgerCommitLog reads offsets below the divide from `commitlog/`, the rest from DLedger's data: the "
          "file is never read",
          "finding; the segment is left out of the log"),
    Check("commitlog.record_too_large", _E, RECORDS,
          "TOTALSIZE above the reader's `maxRecordSize` (default 64 MiB; RocketMQ writes at most "
          "maxMessageSize + 64 KiB)",
          "— (4.9.x allocates the record and may run out of memory)",
          "finding; resynchronise"),
    Check("commitlog.unreadable", _E, RECORDS,
          "a segment file listed at planning time cannot be opened when it is read (deleted, unreadable)",
          "—",
          "finding; the other segments are read"),
    Check("commitlog.resynchronised", _W, RECORDS,
          "reading resumed at the next plausible record start after damage: a message magic at p + 4 whose "
          "stored PHYSICALOFFSET equals base offset + p; evidence: where the skipped range began",
          "never resumes after damage",
          "the skipped bytes are reported and the records after them are read (forensics; RocketMQ's recovery "
          "would drop them)"),
    Check("commitlog.body_crc", _E, RECORDS,
          "`crc32(body) & 0x7FFFFFFF` differs from BODYCRC (an empty body has no check)",
          "recovery with `checkCRCOnRecover` stops at the first failure and truncates the log there "
          "(docs/format/recovery.md)",
          "counted and reported for every record, past the first; the record is still read "
          "(`body_crc_ok = false`)"),
    Check("commitlog.records_after_end", _E, RECORDS,
          "valid records (message magic, PHYSICALOFFSET equal to their position) lie after the BLANK record or "
          "zero fill where the segment ends (the finding's position); evidence: the first and last of them, "
          "how many",
          "the log ends at the BLANK or zero fill: the records after it are never read, dispatched or kept "
          "(docs/format/recovery.md)",
          "the records are read and returned; export them before a restart"),
    Check("commitlog.unclosed_segment", _E, RECORDS,
          "a segment that is not the store's last ends without a BLANK record (zero fill or end of file): "
          "RocketMQ closes every segment it rolls over with one, so its tail was zeroed or cut off",
          "recovery treats the segment's end as the end of the log if it is inside the recovery window "
          "(docs/format/recovery.md)",
          "finding at the position where the segment ends; the later segments are read"),
    Check("commitlog.early_blank", _W, RECORDS,
          "a segment that is not the store's last ends with a BLANK record leaving room for the next segment's "
          "first record (RocketMQ writes a BLANK only when the next message does not fit)",
          "treats the BLANK as the segment's end, like any other",
          "finding at the BLANK: the bytes after it may have been overwritten; a batch of messages can also "
          "explain it (the batch, not its first record, did not fit)"),
    Check("commitlog.missing_next_segment", _W, RECORDS,
          "the store's last segment ends with a BLANK record, which RocketMQ writes only as it rolls over to a "
          "new segment, and no file of that next segment exists (not even an empty, preallocated one)",
          "recovery ends the log at the BLANK and appends the next message over it (\"recover last 3 physics "
          "file over\", docs/format/recovery.md)",
          "finding at the BLANK: the newest segment is missing (a copy or restore without it, or deleted) and "
          "the messages written to it are not in this store; or creating it failed (a full disk), and the "
          "message that did not fit was refused to its producer. Look for the file before a restart"),
    Check("commitlog.misplaced_records", _E, RECORDS,
          "a run of structurally valid records whose stored PHYSICALOFFSET is not base offset + position "
          "(a segment copied or renamed, an overlapping copy); evidence: the offsets they claim",
          "— (RocketMQ writes PHYSICALOFFSET = the write position; a misnamed file is served from the wrong "
          "offsets)",
          "not returned, so no physical offset is ever read twice or from the wrong place; the copy whose "
          "name matches its records wins"),
    Check("commitlog.properties_crc", _E, RECORDS,
          "the 5.x `__CRC32#` property (written with `enabledAppendPropCRC`) differs from the CRC32 of the "
          "record's other bytes",
          "checked only with `forceVerifyPropCRC` (recovery then stops there); otherwise ignored "
          "(docs/format/commitlog.md)",
          "reported for every record (`properties_crc_ok = false`); the record is read"),
    Check("commitlog.queue_offset_gap", _E, RECORDS,
          "within one topic-queue, the QUEUEOFFSETs of the records that get a ConsumeQueue entry (not PREPARED "
          "or ROLLBACK) skip values; evidence: the offset expected and the one found",
          "— (the broker numbers them consecutively; a gap means records of the queue are missing from the "
          "CommitLog: damage skipped by the reader, or a segment lost)",
          "finding at the record after the gap; the records are read; the queue's ConsumeQueue entries will "
          "not be contiguous"),
    Check("commitlog.queue_offset_repeat", _E, RECORDS,
          "within one topic-queue, a record's QUEUEOFFSET repeats or goes back (to anything but 0)",
          "the dispatcher skips an entry below the queue's end (\"Build consume queue repeatedly\") "
          "(docs/format/rocketmq-dispatch.md)",
          "finding at the record; a rebuild places it as RocketMQ would"),
    Check("commitlog.queue_offset_reset", _W, RECORDS,
          "within one topic-queue, QUEUEOFFSET drops back to 0: the topic was deleted and created again under "
          "the same name",
          "the entry is appended at the queue's end (docs/format/rocketmq-dispatch.md §4)",
          "finding at the record; consumers of the queue see offsets restart"),
    Check("commitlog.time_backwards", _I, RECORDS,
          "within one segment, a record's store timestamp is earlier than the previous record's (the broker's "
          "clock stepped back); one finding per segment, evidence: how many and the largest step",
          "— (store times only steer recovery's start and index lookups by time)",
          "reported; time-range queries by store time may miss or include records near the step"),
    Check("commitlog.time_implausible", _W, RECORDS,
          "a store timestamp before 2012 or more than a day after the verify run; one finding per segment, "
          "evidence: how many and the first",
          "— (recovery compares store times with the checkpoint; a far-future time can make it pick the "
          "wrong start segment)",
          "reported; the records are read"),
    Check("commitlog.gap", _E, LAYOUT,
          "a segment does not start where the previous one ends",
          "logs the gap and carries on (docs/format/commitlog.md)",
          "finding; the segments on both sides are read"),
    Check("commitlog.overlap", _E, LAYOUT,
          "a segment starts inside the previous one",
          "—",
          "finding; both segments are read"),
    Check("commitlog.wrong_size", _E, LAYOUT,
          "a non-empty segment's size differs from the other segments' size",
          "refuses to load the store (docs/format/commitlog.md)",
          "finding; the segment is read as far as it goes"),
    Check("commitlog.empty_segment", _W, LAYOUT,
          "a segment file of zero bytes",
          "5.1.3+ deletes a zero-length last file at start-up; older releases refuse to load",
          "finding; nothing to read"),
    Check("commitlog.misaligned_name", _W, LAYOUT,
          "a segment's base offset (its name) is not a multiple of the segment size",
          "—",
          "finding; the segment is read at the offset its name gives"),
    Check("store.multipath_commitlog", _I, LAYOUT,
          "the CommitLog is a multi-path one (`storePathCommitLog` with several directories, "
          "`readOnlyCommitLogStorePaths`; from broker.conf, `--commitlog-path` or option `storePathCommitLog`); "
          "evidence: the directories",
          "MultiPathMappedFileQueue loads the files of every directory, sorted by name, as one log "
          "(docs/format/commitlog.md)",
          "read as one log, physical offsets as RocketMQ reports them; a repair is refused (it swaps a rebuilt "
          "store in beside the root and cannot move the other directories)"),
    Check("commitlog.path_missing", _E, LAYOUT,
          "a directory of a multi-path CommitLog is not there or is not a directory",
          "lists nothing from it, silently, and loads the log without its segments (docs/format/commitlog.md)",
          "finding; the other directories are read; the rebuild, recovery verdict and repair are refused (part "
          "of a log): give the missing one (a copy made without it?)"),
    Check("commitlog.path_duplicate_segment", _W, LAYOUT,
          "the same segment (file name) in two directories of a multi-path CommitLog, byte for byte equal",
          "loads both; `checkSelf` logs \"[BUG]\"; recovery walks both (docs/format/commitlog.md)",
          "finding; read once, from the directory listed first; rebuild, recovery verdict and repair refused"),
    Check("commitlog.path_conflicting_segment", _E, LAYOUT,
          "the same segment (file name) in two directories of a multi-path CommitLog with different bytes",
          "loads both; which one serves an offset depends on a HashSet's order of the path strings "
          "(docs/format/commitlog.md)",
          "finding naming both; the copy in the directory listed first is read, the other is not; rebuild, "
          "recovery verdict and repair refused"),
    Check("commitlog.path_gap", _E, LAYOUT,
          "segments missing between two segments of a multi-path CommitLog; evidence: the directories RocketMQ "
          "would have written them to (the (offset / segment size) % n-th of the sorted directory names)",
          "logs the gap and carries on, as in one directory (docs/format/commitlog.md)",
          "finding; the segments on both sides are read; look for the missing ones in that directory"),
    Check("commitlog.path_unlisted", _W, LAYOUT,
          "the store root's `commitlog/` holds segments but is not among the directories of the multi-path "
          "CommitLog given",
          "does not read it",
          "finding; not read either; check the directories given"),
    Check("commitlog.multipath_suspected", _E, LAYOUT,
          "a CommitLog given as one directory holds only every k-th segment (k >= 2): one directory of a "
          "multi-path CommitLog given without the others (or every other segment lost)",
          "— (with all its directories RocketMQ reads one log)",
          "finding (the gaps are findings too); a repair is refused (it would cut a log it sees in part); give "
          "the other directories (`--broker-conf`, `--commitlog-path`, option `storePathCommitLog`)"),
    Check("store.stray_file", _W, LAYOUT,
          "a file in `commitlog/` whose name is not a 20-digit offset",
          "ignored",
          "ignored"),
    Check("store.stray_entry", _W, LAYOUT,
          "a directory or special file in `commitlog/`",
          "ignored",
          "ignored"),
    Check("store.unsupported_engine", _E, LAYOUT,
          "the store was written with an engine we do not read yet: several `dledger-*/` directories (or one "
          "without `data/`), data in 5.5's `rocksdbstore/`, LMQ queues, or (from broker.conf) "
          "a DLedger CommitLog or RocksDB ConsumeQueue whose files are not under the store root, a RocksDB-only "
          "index",
          "RocketMQ reads and recovers these through the engine broker.conf names (store/engines.py lists the "
          "files and settings)",
          "finding naming the evidence; the work the engine would make wrong (reading the CommitLog or queues, "
          "queue checks, a rebuild, a recovery verdict, a repair) is refused with a one-line message rather than "
          "answered as for a classic store"),
    Check("store.partial_engine", _W, LAYOUT,
          "the store was written with an engine we read correctly but on which some commands are not mirrored yet: "
          "a DLedger CommitLog (`dledger-<selfId>/data/`: read through its entries, its old `commitlog/` up to the "
          "divide; its queues and IndexFiles checked, rebuilt and its restart predicted; repair refused), a "
          "RocksDB ConsumeQueue (`consumequeue/` or `consumequeue_rocksdb/`: queues, their check, the lag and the "
          "restart read from the database; reading ConsumeQueue files and a repair refused), the RocksDB "
          "config (v1 `config/consumerOffsets/`, `config/topics/`, `config/subscriptionGroups/`, `config/metadata/`, "
          "v2 `config/rdb/`: read; a repair refused), BatchConsumeQueues (`batchconsumequeue/`, 5.x "
          "`queue.type=BatchCQ`: read, rebuilt, checked, their restart predicted and repaired in-process, rebuilt "
          "and checked by the Spark jobs; nothing refused), LMQ multi-dispatch (`consumequeue/%LMQ%...`, or "
          "enableLmq/enableMultiDispatch: every command follows the %LMQ% queues as RocketMQ dispatches them; "
          "nothing refused, the warning says what is followed)",
          "RocketMQ reads and recovers the engine its own way (DLedger: `DLedgerMmapFileStore.recover`, then "
          "`DLedgerCommitLog`'s; docs/format/dledger.md, docs/format/rocksdb-queues.md)",
          "finding naming the evidence, what is read and what is refused; the refused commands stop with a "
          "one-line message (exit 2), the rest answer as RocketMQ would; alone it does not make a check exit 3 "
          "(it is about rocketstore-spark's coverage, not the store)"),
    Check("scrub.segment_changed", _W, RECORDS,
          "a CommitLog segment's bytes differ from the scrub's last record of them (a digest of sampled blocks) "
          "while its size and modification time are the same",
          "RocketMQ only appends to a segment (through its mapping, which moves the modification time) until "
          "retention deletes it: bytes that change under the same size and time were not written by the broker "
          "(a disk or controller fault, a file copied over it with its times kept)",
          "finding; the segment is scanned again in full in the same run (its CRC findings say what is damaged); "
          "compare it with a replica or backup"),
    Check("rocksdb.unreadable", _E, LAYOUT,
          "a RocksDB database of the store (the RocksDB ConsumeQueue in `consumequeue/`, consumer offsets in "
          "`config/consumerOffsets/`) cannot be opened read-only or read: missing or damaged files, a foreign "
          "database, a column family RocketMQ creates is absent",
          "RocketMQ's `RocksDBConsumeQueueStore.load` / `RocksDBConfigManager.init` fail and the broker does not "
          "start (docs/format/rocksdb-queues.md)",
          "finding naming the database and RocksDB's reason; its queues or offsets are not reported; restore the "
          "database from a replica or backup (RocketMQ rebuilds the ConsumeQueue by re-dispatching the "
          "CommitLog only when the database is gone)"),
    Check("store.unknown_entry", _W, LAYOUT,
          "an entry under the store root that belongs to no RocketMQ store engine we know",
          "RocketMQ ignores what it does not open",
          "finding; left alone (a repair copies what it copies of the root, nothing more)"),
    Check("consumequeue.entry_mismatch", _E, QUEUES,
          "an entry differs from the one RocketMQ's dispatch writes at that queue offset for this CommitLog "
          "(physical offset, size, tagsCode); evidence: both",
          "serves the entry as it is: a consumer is handed the wrong record, or a pull fails to decode it "
          "(docs/format/consumequeue.md)",
          "finding at the entry; a rebuild (`jobs/rebuild.py`) writes the right one"),
    Check("consumequeue.extra_entry", _E, QUEUES,
          "an entry where RocketMQ's dispatch writes none, pointing into the CommitLog's live range (a record "
          "of another queue, no record, or a duplicate)",
          "serves it (docs/format/consumequeue.md)",
          "finding at the entry; a rebuild drops it"),
    Check("consumequeue.entry_past_end", _E, QUEUES,
          "an entry points at or beyond the end of the CommitLog's valid data",
          "recovery removes it (`truncateDirtyLogicFiles`) when it cuts the CommitLog (docs/format/recovery.md)",
          "finding at the entry; the recovery report says what the cut removes"),
    Check("consumequeue.missing_entry", _E, QUEUES,
          "a record that gets a ConsumeQueue entry has none, below the queue's end (a hole)",
          "never fills it: dispatch resumes at the queue's end; the record is invisible to consumers "
          "(docs/format/recovery.md)",
          "finding at the position the entry belongs; a rebuild writes it"),
    Check("consumequeue.lagging", _W, QUEUES,
          "the queue ends before the CommitLog's last records for it: they were written but not dispatched "
          "(a crash before the dispatcher caught up, or a cut file); evidence: how many, the first missing",
          "after a crash, recovery re-dispatches from its start segment on; a clean start repairs it only in "
          "4.9.x (reput from the largest queue end) and 5.3.2+ (beyond maxCQ) (docs/format/recovery.md)",
          "finding at the queue's end; a rebuild writes the missing entries"),
    Check("consumequeue.invalid_entry", _E, QUEUES,
          "an entry failing RocketMQ's validity test (offset < 0, size <= 0: e.g. zeroed) with valid entries "
          "after it in the queue",
          "recovery ends the queue at the first invalid entry: the entries after it are lost "
          "(docs/format/recovery.md step 1)",
          "finding at the entry; the entries after it are still checked"),
    Check("consumequeue.not_increasing", _E, QUEUES,
          "an entry's physical offset is not above the previous entry's",
          "dispatch skips such records (\"already dispatched\"), so RocketMQ never writes it "
          "(docs/format/rocketmq-dispatch.md)",
          "finding at the entry"),
    Check("consumequeue.file_size", _E, QUEUES,
          "a ConsumeQueue file whose size differs from the queue file size (mappedFileSizeConsumeQueue, "
          "rounded up to 20; from the broker settings or the store's other files)",
          "fails to load the queue (`MappedFileQueue.load` checks every file's size) (docs/format/consumequeue.md)",
          "finding; its entries are checked — except in a file larger than 2 GiB − 1, more than RocketMQ can "
          "write (the size is a Java int): a sparse or foreign file, not read"),
    Check("consumequeue.file_gap", _E, QUEUES,
          "a queue's file does not start where the previous one ends, or its name is not a multiple of the file "
          "size",
          "loads the files in name order; lookups by queue offset land in the wrong file "
          "(docs/format/consumequeue.md)",
          "finding; entries are located by each file's own name"),
    Check("batchcq.unit_mismatch", _E, BATCH_QUEUES,
          "a BatchConsumeQueue unit differs from the one RocketMQ 5.x's dispatch writes for that record (physical "
          "offset, size, tagsCode, store time, base offset = INNER_BASE or the queue offset, batch size = INNER_NUM "
          "or 1, compacted offset -1, reserved 0); evidence: both units in hex",
          "serves the unit as it is: a consumer pulling an offset it covers is handed the wrong record or batch, "
          "and the queue's min/max offsets come from the first and last unit (docs/format/batchconsumequeue.md)",
          "finding at the unit; `rocketmq.batch_queues` computes the right files (byte-identical to RocketMQ's)"),
    Check("batchcq.extra_unit", _E, BATCH_QUEUES,
          "BatchConsumeQueue units beyond those RocketMQ's dispatch writes for the log (a record that is not "
          "there, or of another queue)",
          "serves them until a recovery truncates units past the CommitLog's end (docs/format/batchconsumequeue.md)",
          "finding at the first such unit"),
    Check("batchcq.lagging", _W, BATCH_QUEUES,
          "the BatchConsumeQueue ends before the last records of the log for it (written, not dispatched: a "
          "crash before the dispatcher caught up, or a cut file); evidence: how many",
          "dispatch resumes from the largest physical offset in the queues; after a crash, recovery re-dispatches "
          "from its start segment (docs/format/recovery.md)",
          "finding at the queue; the expected units are computed by `rocketmq.batch_queues`"),
    Check("batchcq.not_batch_topic", _E, BATCH_QUEUES,
          "a `batchconsumequeue/` queue of a topic `config/topics.json` does not give `queue.type=BatchCQ` (or "
          "does not list)",
          "does not start: 5.5.1's `ConsumeQueueStore.load` throws for it (`queueTypeShouldBe`: \"The queue type "
          "of topic: T should be BatchCQ, but is SimpleCQ\"), so `DefaultMessageStore.load` fails "
          "(docs/format/batchconsumequeue.md)",
          "finding; the queue is not checked against the log; `rocketstore recover plan` refuses the store"),
    Check("batchcq.classic_queue_of_batch_topic", _E, BATCH_QUEUES,
          "a `consumequeue/` queue (an integer-named directory) of a topic `config/topics.json` gives "
          "`queue.type=BatchCQ` (5.x; 4.x has no queue types)",
          "does not start: 5.x's `ConsumeQueueStore.load` throws for it (`queueTypeShouldBe`: \"The queue type "
          "of topic: T should be SimpleCQ, but is BatchCQ\"), so `DefaultMessageStore.load` fails "
          "(docs/format/batchconsumequeue.md)",
          "finding at the directory (even with no `batchconsumequeue/`); the queue's entries are still checked as "
          "a ConsumeQueue's (RocketMQ's dispatch writes none for the topic: `consumequeue.extra_entry`); "
          "`rocketstore recover plan` refuses the store"),
    Check("index.unknown_geometry", _E, INDEX,
          "an IndexFile holding entries whose slot count (the broker's maxHashSlotNum) cannot be established: "
          "the given `hashSlotNum` does not fit its size, or no single slot count fits both its size and its "
          "entries, or the file is larger than 2 GiB − 1, more than RocketMQ can write (docs/format/indexfile.md)",
          "— (the broker always knows its own setting; a changed setting makes it misread older files)",
          "`rocketmq_index` fails naming the file (give `hashSlotNum`); `rocketmq_index_header` shows the "
          "file with no geometry and the reason"),
    Check("index.bad_header", _E, INDEX,
          "the header contradicts the file: index_count beyond what the file holds (cut short) or 0, "
          "begin after end (timestamps or physical offsets), hash_slot_count above index_count",
          "reads the header as it is; lookups stop at the bounds it gives (docs/format/indexfile.md)",
          "finding; entries are read only as far as the file holds them"),
    Check("index.bad_chain", _E, INDEX,
          "a slot head or prev_index outside 0 .. index_count - 1, a prev_index not older than its entry (a "
          "loop), or an entry in the chain of a slot its hash does not map to",
          "follows the chain as written: lookups return wrong records, stop early, or loop until "
          "maxNum (docs/format/indexfile.md)",
          "finding at the entry or slot; a rebuild writes correct chains"),
    Check("index.unreachable_entries", _E, INDEX,
          "entries that no slot's chain reaches: lookups never return their records",
          "— (lookups walk chains from the slot heads only)",
          "one finding per file with the count and the first; a rebuild indexes them again"),
    Check("index.bad_time", _E, INDEX,
          "an entry's time difference is negative or beyond the header's end timestamp",
          "time-bounded lookups (`queryMessage` begin/end) skip or wrongly return the entry "
          "(docs/format/indexfile.md)",
          "finding at the entry"),
    Check("index.wrong_entry", _E, INDEX,
          "an entry's (key hash, physical offset) is no key of the record at that offset (or no record starts "
          "there)",
          "returns the record at that offset for a key it does not carry; clients filter by key again",
          "finding at the entry"),
    Check("index.missing_key", _E, INDEX,
          "a key RocketMQ's dispatch puts for a record inside the file's range (its begin to end physical "
          "offset) is not in the file; one finding per file, evidence: how many and the first",
          "lookups by that key miss the record (docs/format/indexfile.md)",
          "finding; a rebuild indexes them"),
    Check("index.lagging", _W, INDEX,
          "records after the newest IndexFile's end physical offset have keys that no IndexFile holds",
          "after a crash, recovery re-dispatches from its start segment; a clean start does not re-index "
          "(docs/format/recovery.md)",
          "one finding per store with how many keys and the first record; a rebuild indexes them"),
    Check("store.abort_present", _W, STATE,
          "the `abort` file exists: the broker is running or did not shut down cleanly",
          "the next start runs abnormal recovery (docs/format/recovery.md)",
          "finding; the recovery report says what that recovery would cut"),
    Check("store.lock_present", _I, STATE,
          "the `lock` file exists (RocketMQ creates it and holds a file lock while running; it stays after a "
          "stop)",
          "takes the lock at start-up; fails if another broker holds it",
          "reported; a lock held by a running broker cannot be seen in a copy"),
    Check("checkpoint.missing", _W, STATE,
          "the store has no `checkpoint` file (or it is shorter than its fields)",
          "starts from zeros: abnormal recovery walks from the first segment (docs/format/checkpoint.md)",
          "finding"),
    Check("checkpoint.ahead_of_log", _E, STATE,
          "the checkpoint vouches for more than the files hold: physicMsgTimestamp or logicsMsgTimestamp later "
          "than the CommitLog's newest record, or (5.x) confirmPhyOffset / logicsPhysicalOffset beyond its "
          "valid end",
          "recovery trusts the checkpoint to choose where to start; data it vouched for was lost after it was "
          "flushed (docs/format/recovery.md)",
          "finding with both values; the recovery report shows the consequence"),
    Check("checkpoint.index_ahead", _W, STATE,
          "indexMsgTimestamp is later than the newest IndexFile's end timestamp (index entries it vouches for "
          "are missing)",
          "deletes IndexFiles newer than the checkpoint on abnormal recovery only (docs/format/recovery.md)",
          "finding with both values"),
    Check("offsets.unreadable", _W, OFFSETS,
          "a broker config file (consumerOffset.json, topics.json, ...) is empty or cannot be parsed; the broker "
          "falls back to its `.bak`",
          "`ConfigManager.load` reads the `.bak` instead; if both fail the table starts empty",
          "finding naming the file and why; the `.bak` is read as the broker would"),
    Check("offsets.beyond_max", _W, OFFSETS,
          "a committed consumer offset is above its queue's max offset",
          "a pull at that offset gets OFFSET_OVERFLOW and the broker corrects it to the max; messages written "
          "meanwhile at lower offsets are skipped",
          "finding with the offset, the bounds and a reset plan (to-latest)"),
    Check("offsets.below_min", _W, OFFSETS,
          "a committed consumer offset is below its queue's min offset: messages expired before the group "
          "consumed them",
          "a pull corrects the offset to the min (OFFSET_TOO_SMALL); the expired messages are gone",
          "finding with how many messages the group never consumed, and a reset plan (to-earliest)"),
    Check("offsets.unknown_queue", _W, OFFSETS,
          "a committed offset for a topic or queue the store has no ConsumeQueue for",
          "keeps the offset; a pull finds no queue (a deleted topic, or offsets copied from another broker)",
          "finding"),
    Check("rebuild.unsafe_topic", _W, REBUILD,
          "a topic read from the CommitLog cannot be a directory name (empty, `.`, `..`, a `/` or NUL, more than "
          "255 bytes)",
          "— (the broker validates topic names when messages are sent; such a record is damage or a foreign "
          "write)",
          "its queues are not rebuilt; the rest are"),
    Check("timers.unit_past_log_end", _E, TIMERS,
          "a TimerLog unit that recovery keeps names a message (offset_py + size_py) that ends past the end of "
          "the CommitLog (a log cut by a crash or a repair, the TimerLog left as it was)",
          "recover() never compares a unit with the CommitLog: the unit stays in its wheel slot; when the slot "
          "falls due the message is read at that offset — nothing (the timer is skipped) until the broker has "
          "written past it, then whatever lies there: another timer delivered early, or a record without "
          "REAL_QID that stalls the dequeue (docs/format/timers.md)",
          "finding at the unit; `rocketstore recover plan` cuts the TimerLog and rewrites the wheel with the log "
          "(action cut_timers) and lists the timers lost (lost-timers.parquet)"),
    Check("timers.unit_not_timer_message", _E, TIMERS,
          "a TimerLog unit that recovery keeps names bytes of the log (offset_py, size_py) that are not a record "
          "of `rmq_sys_wheel_timer` with that TOTALSIZE",
          "the dequeue decodes whatever is there (StoreUtil.getMessage): a failed decode skips the timer, another "
          "record is put back to a REAL_TOPIC it may not have (docs/format/timers.md)",
          "finding at the unit; the timer it stood for is not delivered as sent"),
    Check("timers.bad_unit", _E, TIMERS,
          "the TimerLog's walk (unit by unit from each file's start) ends at bytes that are not zero: a bad magic "
          "(a bit above the low four), a size other than 52, a torn unit",
          "recover() ends the TimerLog there and truncates it (truncateDirtyFiles): the units after it, and the "
          "later files, are lost; their timers are not delivered (docs/format/timers.md)",
          "finding at the position; the units before it are read"),
    Check("timers.slot_past_timerlog_end", _W, TIMERS,
          "after RocketMQ's recovery of the TimerLog, a live wheel slot still ends its chain at or past the "
          "TimerLog's end",
          "the dequeue of that slot reads past the TimerLog's data: nothing, or, once new units are written "
          "there, another slot's chain (docs/format/timers.md)",
          "finding at the slot"),
    Check("rebuild.lmq_not_dispatched", _W, REBUILD,
          "a record's INNER_MULTI_DISPATCH names a queue RocketMQ does not dispatch it to: a name with `/`, a "
          "different number of names and INNER_MULTI_QUEUE_OFFSET pieces, or an offset that is not a long",
          "`ConsumeQueue.multiDispatchLmqQueue` passes a `/` name over, dispatches none of a record whose counts "
          "differ, and throws at an unparseable offset (no name after it dispatched)",
          "the same: no entry, and no path is made from the name; finding naming the record's segment and byte"),
)

CHECKS: dict[str, Check] = {c.id: c for c in CATALOGUE}
assert len(CHECKS) == len(CATALOGUE), "duplicate check id"

_PREAMBLE = """\
# Catalogue of checks

<!-- generated from rocketstore_spark/checks.py: python -m rocketstore_spark.checks > docs/checks.md -->

Every problem rocketstore-spark finds in a store is a **finding**: check id, severity (`error`, `warning`,
`info`), file, byte position (`file_position`, within that file), message and evidence. Readers never stop
on one unless asked to: with `strict` the CommitLog readers raise on the first `error` finding of any kind
below (layout, record structure, BODYCRC, records after the end, misplaced records). Each entry says
what is checked, what RocketMQ itself does in that situation (with the section of `docs/format/`), and
what our readers do. The readers report the CommitLog checks as they read; `jobs/verify.py` (and
`verify.store.verify_store` without Spark) runs every check below and adds to each finding, where known, the
physical offset, topic, queue and queue offset. A unit of work (a segment or a range of one, a queue, an IndexFile,
the consumer offsets file) reports at most 20 findings of one check in full, then one more with the count of the
rest (`omitted`) that names the first and the last of them: memory and output follow that cap, not the damage.

A BLANK record, zero fill where a record would start, or the end of the file end a segment normally
(`stop_reason` in `rocketmq_segments`); they are not findings. Records whose 5.x `__CRC32#` property does
not match get `properties_crc_ok = false` (RocketMQ checks it only with `forceVerifyPropCRC`).
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown() -> str:
    """docs/checks.md: the preamble, then one table per area, in catalogue order."""
    out = [_PREAMBLE]
    areas = list(dict.fromkeys(c.area for c in CATALOGUE))
    for area in areas:
        out += [f"## {area}", "",
                "| check | severity | rule | what RocketMQ does | what we do |", "|---|---|---|---|---|"]
        out += [f"| `{c.id}` | {c.severity} | {_cell(c.rule)} | {_cell(c.rocketmq)} | {_cell(c.action)} |"
                for c in CATALOGUE if c.area == area]
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(render_markdown(), end="")
