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
INDEX = "IndexFiles"
REBUILD = "Rebuild"

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
    Check("commitlog.misplaced_records", _E, RECORDS,
          "a run of structurally valid records whose stored PHYSICALOFFSET is not base offset + position "
          "(a segment copied or renamed, an overlapping copy); evidence: the offsets they claim",
          "— (RocketMQ writes PHYSICALOFFSET = the write position; a misnamed file is served from the wrong "
          "offsets)",
          "not returned, so no physical offset is ever read twice or from the wrong place; the copy whose "
          "name matches its records wins"),
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
    Check("store.stray_file", _W, LAYOUT,
          "a file in `commitlog/` whose name is not a 20-digit offset",
          "ignored",
          "ignored"),
    Check("store.stray_entry", _W, LAYOUT,
          "a directory or special file in `commitlog/`",
          "ignored",
          "ignored"),
    Check("index.unknown_geometry", _E, INDEX,
          "an IndexFile holding entries whose slot count (the broker's maxHashSlotNum) cannot be established: "
          "the given `hashSlotNum` does not fit its size, or no single slot count fits both its size and its "
          "entries (docs/format/indexfile.md)",
          "— (the broker always knows its own setting; a changed setting makes it misread older files)",
          "`rocketmq_index` fails naming the file (give `hashSlotNum`); `rocketmq_index_header` shows the "
          "file with no geometry and the reason"),
    Check("rebuild.unsafe_topic", _W, REBUILD,
          "a topic read from the CommitLog cannot be a directory name (empty, `.`, `..`, a `/` or NUL, more than "
          "255 bytes)",
          "— (the broker validates topic names when messages are sent; such a record is damage or a foreign "
          "write)",
          "its queues are not rebuilt; the rest are"),
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
what our readers do.

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
