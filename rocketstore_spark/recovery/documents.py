"""The repair's documents: the plan, the journal and the receipt, typed and versioned (``documents.Document``),
and the names they have in a plan directory (driver or CLI).

A plan directory holds

    plan.json               ``Plan``: what ``recovery.plan.make_plan`` decided (type rocketstore-spark/repair-plan)
    lost-messages.parquet   the export of the messages the repair loses
    lost-timers.parquet     the timers a restart would have delivered whose message the cut loses (a store with
                            timer files; action ``cut_timers``)
    apply.json              ``Journal``: how far ``recovery.apply`` got (type rocketstore-spark/repair-journal)

``apply_plan`` and ``rollback`` return a ``Receipt`` (the journal when they finished, with the time taken).

Plan (version 4) fields:

    plan_id, store, made_at, rocketmq_version, process_offset
    settings        options       the broker settings given, as given
                    broker_conf   the broker.conf given (its path: information only, never read again)
                    release_family  the release family given (overrides the release's)
                    resolved      every setting as decided, where each came from, the release and its family,
                                  the broker.conf's sha256 (``rocketmq.settings.BrokerSettings.to_json``):
                                  ``apply`` follows these, resolving nothing again
    export          the export file, its message count and sha256
    inventory       every file of the store: relative path -> [size, mtime_ns]
    checksums       the sha256 of every store file the actions change
    actions         in order: export, cut, delete, rebuild, keep_queues, reset_offsets, cut_timers,
                    write_checkpoint, remove
                    (``recovery.plan``)
    queues          the queues the restart keeps as RocketMQ's own files say, with the min and max offset the
                    repaired store must give each (``recovery.plan.kept_queues``): apply's gate compares them
    alternatives    other ways out, in words
    report          the recovery report the plan was made from (``recovery.report``)
    plan_version    the same number as document_version (kept for readers of version 2)

Journal and receipt (version 1) fields: phase (staging, staged, applied, rolling-back, rolled-back), mode (copy,
in-place), plan_id, store, target, staging, backup, settings (the plan's resolved settings the apply followed),
then as the apply goes: staging_ino, store_ino, staged (what was copied, linked, cut and rebuilt),
process_offset, lost_messages, recovery_after (the staged store's recovery report, in brief), exchange (how
the store was swapped where it could not be exchanged), applied_at, repaired_kept; a receipt adds seconds and
already_applied.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from rocketstore_spark.documents import Document

PLAN = "plan.json"
EXPORT = "lost-messages.parquet"
LOST_TIMERS = "lost-timers.parquet"
JOURNAL = "apply.json"


@dataclass
class Plan(Document):
    """A repair plan (module docstring)."""
    DOCUMENT_TYPE = "rocketstore-spark/repair-plan"
    DOCUMENT_VERSION = 4

    plan_id: str
    store: str
    made_at: str
    rocketmq_version: str
    process_offset: int | None
    settings: dict
    export: dict
    inventory: dict
    checksums: dict
    actions: list
    alternatives: list
    queues: list
    report: dict

    def to_json(self) -> dict:
        return super().to_json() | {"plan_version": self.DOCUMENT_VERSION}

    def action(self, kind: str) -> dict | None:
        """The plan's first action of ``kind`` (cut, delete, ...), or None."""
        return next((a for a in self.actions if a["action"] == kind), None)


@dataclass
class Journal(Document):
    """How far an apply or rollback of a plan got (module docstring)."""
    DOCUMENT_TYPE = "rocketstore-spark/repair-journal"
    DOCUMENT_VERSION = 1

    phase: str
    mode: str
    plan_id: str
    store: str
    target: str
    staging: str
    backup: str | None
    settings: dict
    staging_ino: int | None = None
    store_ino: int | None = None
    staged: dict | None = None
    process_offset: int | None = None
    lost_messages: int | None = None
    recovery_after: dict | None = None
    exchange: str | None = None
    applied_at: str | None = None
    repaired_kept: str | None = None

    def receipt(self, **more) -> "Receipt":
        return Receipt(**{f.name: getattr(self, f.name) for f in fields(self)}, **more)


@dataclass
class Receipt(Journal):
    """What an apply or rollback did: its journal when it finished, the time it took, and whether the plan
    had been applied already (nothing was done)."""
    DOCUMENT_TYPE = "rocketstore-spark/repair-receipt"
    DOCUMENT_VERSION = 1

    seconds: float | None = None
    already_applied: bool = field(default=False)


def plan_path(plan_dir: Path) -> Path:
    return plan_dir / PLAN


def journal_path(plan_dir: Path) -> Path:
    return plan_dir / JOURNAL
