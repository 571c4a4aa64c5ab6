"""The recovery report as plain text (driver): what a restart would do, and what it would lose."""
from __future__ import annotations

import datetime as dt

from rocketstore_spark.report.text import render_table

MAX_QUEUES = 40
MAX_TOPICS = 10          # topics named in a sentence


def render_recovery(doc: dict) -> str:
    """A ``recovery.report`` document as text."""
    cp = doc["checkpoint"]
    stop = doc["stop"]
    lost = doc["lost"]
    out = [f"Recovery report for {doc['store']}",
           f"  mirrors RocketMQ {doc['rocketmq_version']} (release {doc['release']['detected_or_given']}: "
           f"{doc['release']['source']})",
           f"  start: {doc['shutdown']} — {doc['shutdown_reason']}",
           f"  checkpoint: physicMsgTimestamp {cp['physic_msg_timestamp']}, logicsMsgTimestamp "
           f"{cp['logics_msg_timestamp']}, indexMsgTimestamp {cp['index_msg_timestamp']}, min timestamp "
           f"{cp['min_timestamp']} (3 s margin), logicsPhysicalOffset {cp['logics_physical_offset']}",
           f"  ConsumeQueues reach physical offset {doc['max_cq']:,} (maxCQ)",
           ]
    if doc["process_offset"] is None:
        out.append(f"  no CommitLog segment: {doc['shutdown_reason']}")
    else:
        out += [f"  the CommitLog walk starts at {doc['start_file']}: {doc['start_reason']}",
                f"  it stops at {stop['file']} byte {stop['file_position']:,}: {stop['reason']}",
                f"  the CommitLog would end at physical offset {doc['process_offset']:,}"]
    out += _dledger_lines(doc)
    cut = doc["commitlog_bytes_cut"]
    out.append(f"  cut: {cut:,} bytes of CommitLog data after it; segments deleted: "
               f"{', '.join(doc['commitlog_files_deleted']) or 'none'}")
    out.append(f"  IndexFiles deleted: {', '.join(doc['index_files_deleted']) or 'none'}")
    d = doc["dispatch"]
    if d["from"] is not None and d["from"] < d["to"]:
        out.append(f"  dispatched again: physical offsets {d['from']:,} .. {d['to']:,}")
    changed = [q for q in doc["consumequeues"]
               if q["entries_cut"] or q["files_deleted"] or q["max_offset"] != q["max_offset_on_disk"]]
    if changed:
        out += ["", "ConsumeQueues the restart changes", render_table(
            ["topic", "queue", "max offset on disk", "after recovery", "entries cut", "files deleted",
             "entries dispatched"],
            [(q["topic"], q["queue_id"], q["max_offset_on_disk"], q["max_offset"], q["entries_cut"],
              len(q["files_deleted"]), q["entries_dispatched"]) for q in changed[:MAX_QUEUES]],
            numeric={"queue", "max offset on disk", "after recovery", "entries cut", "files deleted",
                     "entries dispatched"})]
        if len(changed) > MAX_QUEUES:
            out.append(f"  ... and {len(changed) - MAX_QUEUES} more queue(s) (all of them in --json)")
    out.append("")
    if lost["messages"]:
        out.append(f"LOST: {lost['messages']:,} valid, CRC-correct message(s) at physical offsets "
                   f"{lost['first_physical_offset']:,} .. {lost['last_physical_offset']:,}, stored "
                   f"{lost['first_store_time']} .. {lost['last_store_time']}")
        out.append(render_table(["topic", "queue", "messages", "queue offsets"],
                                [(q["topic"], q["queue_id"], q["messages"], queue_offsets_lost(q))
                                 for q in lost["queues"][:MAX_QUEUES]], numeric={"queue", "messages"}))
        if doc.get("store_type") == "defaultRocksDB":      # no repair of RocksDB ConsumeQueue stores yet
            out.append("  before restarting the broker, export them (rocketstore export); rocketstore-spark does not "
                       "repair a store with a RocksDB ConsumeQueue")
        else:
            out.append("  before restarting the broker, export them and repair without losing more: "
                       "rocketstore recover plan STORE --output DIR, then rocketstore recover apply DIR --output NEW "
                       "(or --in-place)")
    else:
        out.append("Nothing valid would be lost.")
    unreachable = doc["unreachable"]
    if unreachable["messages"]:
        out += ["", f"UNREACHABLE: {unreachable['messages']:,} message(s) stay in the CommitLog at physical offsets "
                    f"{unreachable['first_physical_offset']:,} .. {unreachable['last_physical_offset']:,} but no "
                    "ConsumeQueue reaches them after the restart",
                render_table(["topic", "queue", "messages", "queue offsets"],
                             [(q["topic"], q["queue_id"], q["messages"],
                               f"{q['first_queue_offset']} .. {q['last_queue_offset']}")
                              for q in unreachable["queues"][:MAX_QUEUES]], numeric={"queue", "messages"}),
                f"  to keep them readable, {unreachable['remedy']}"]
    for k, later in enumerate(doc["later_starts"], 1):
        lost = later["lost"]
        out += ["", f"THEN: clean start {k} after it cuts the log further",
                f"  the CommitLog walk starts at {later['start_file']}: {later['start_reason']}",
                f"  it stops at {later['stop']['file']} byte {later['stop']['file_position']:,}: "
                f"{later['stop']['reason']}",
                f"  the CommitLog would end at physical offset {later['process_offset']:,}; segments deleted: "
                f"{', '.join(later['commitlog_files_deleted']) or 'none'}",
                f"  lost: {lost['messages']:,} valid, CRC-correct message(s)" + (
                    f" at physical offsets {lost['first_physical_offset']:,} .. {lost['last_physical_offset']:,}"
                    if lost["messages"] else "")]
    if doc["later_starts"]:
        out.append("  a repair (rocketstore recover plan / apply) cuts there now, after exporting what it loses")
    past = doc["consumer_offsets_past_end"]
    if past:
        out += ["", "Consumer offsets beyond their queue's end after recovery", render_table(
            ["group", "topic", "queue", "committed", "queue end"],
            [(p["consumer_group"], p["topic"], p["queue_id"], p["committed_offset"], p["max_offset_after_recovery"])
             for p in past[:MAX_QUEUES]], numeric={"queue", "committed", "queue end"})]
    return "\n".join(out)


def _dledger_lines(doc: dict) -> list[str]:
    """A DLedger store's recoveries (``recovery.report``'s ``dledger``, ``dledger_crash_walk``): DLedger's own,
    then DLedgerCommitLog's crash walk with its short processOffset."""
    led = doc.get("dledger")
    if not led:
        return []
    out = [f"  DLedger ({led['directory']}): entries {led['begin_index']} .. {led['end_index']} (term "
           f"{led['end_term']}) kept, {led['entries_truncated']:,} truncated; committed index "
           f"{led['committed_index']} at {led['committed_pos']:,} (what getMessage serves)"]
    if led["index_rewritten_from"] is not None:
        out.append(f"  DLedger index units rewritten from entry {led['index_rewritten_from']} (they disagreed)")
    walk = doc.get("dledger_crash_walk")
    if walk:
        out.append(f"  crash walk from {walk['start_file']}: {walk['records']:,} record(s) dispatched up to "
                   f"{walk['end_physical_offset']:,}; processOffset {walk['process_offset']:,} falls "
                   f"{walk['short_by']:,} bytes short (48 per record): {walk['cut_reason']}")
    past = doc.get("queue_entries_past_log_end") or {}
    if past.get("messages"):
        out.append(f"  {past['messages']:,} queue entr(ies) kept past the end of the log "
                   f"({past['first_physical_offset']:,} .. {past['last_physical_offset']:,}): getMessage finds "
                   f"nothing there")
    return out


def _named(topics: dict) -> str:
    """Topics with their message counts, most first, at most MAX_TOPICS named."""
    ranked = sorted(topics.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{t} {n:,}" for t, n in ranked[:MAX_TOPICS]) + (
        f" and {len(ranked) - MAX_TOPICS:,} more" if len(ranked) > MAX_TOPICS else "")


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def _when(iso: str | None) -> str:
    return "-" if iso is None else dt.datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def recovery_in_words(doc: dict) -> tuple[str, list[str]]:
    """(a one-line verdict, then sentences) saying in an operator's words what the broker's next start would
    do to the store of a ``recovery.report`` document — the same facts as ``render_recovery``, no jargon
    beyond RocketMQ's own file names."""
    lost, cut = doc["lost"], doc["commitlog_bytes_cut"]
    shortened = [q for q in doc["consumequeues"] if q["entries_cut"] or q["files_deleted"]]
    past = doc["consumer_offsets_past_end"]
    later = sum(x["lost"]["messages"] for x in doc["later_starts"])
    then = "" if not doc["later_starts"] else ", and a clean restart after it would cut the log again" + (
        f" and lose {_n(later, 'more valid message')}" if later else "")
    unreachable = doc["unreachable"]
    stranded = "" if not unreachable["messages"] else (
        f"; {_n(unreachable['messages'], 'more message')} would stay in the CommitLog where no consumer can read "
        "them")
    if lost["messages"]:
        headline = (f"A restart now would lose {_n(lost['messages'], 'valid message')} "
                    f"in {_n(len(lost['topics']), 'topic')}{then}{stranded}.")
    elif unreachable["messages"]:
        headline = (f"A restart now would leave {_n(unreachable['messages'], 'message')} in "
                    f"{_n(len(unreachable['topics']), 'topic')} in the CommitLog where no consumer can read them: "
                    f"their ConsumeQueues would not reach them{then}.")
    elif cut or doc["commitlog_files_deleted"] or shortened:
        headline = f"A restart now would cut data from the store, but no valid message would be lost{then}."
    elif doc["later_starts"]:
        headline = (f"A restart now keeps everything, but a clean restart after it would cut the log and lose "
                    f"{_n(later, 'valid message')}.")
    else:
        headline = "A restart now keeps everything: nothing would be cut or lost."
    out = [("The broker did not shut down cleanly (the abort file is present), so its next start runs crash "
            if doc["shutdown"] == "abnormal" else "The broker shut down cleanly, so its next start runs normal ")
           + f"recovery, as RocketMQ {doc['rocketmq_version']} does."]
    if doc["process_offset"] is None:
        out.append(f"There is no CommitLog segment: {doc['shutdown_reason']}.")
    else:
        stop = doc["stop"]
        out.append(f"It reads the CommitLog from segment {doc['start_file']} and stops at {stop['file']} byte "
                   f"{stop['file_position']:,} ({stop['reason']}): the log ends at physical offset "
                   f"{doc['process_offset']:,}.")
    removed = []
    if cut:
        removed.append(f"{cut:,} bytes of CommitLog data after that point are cut")
    if doc["commitlog_files_deleted"]:
        removed.append(f"{_n(len(doc['commitlog_files_deleted']), 'CommitLog segment')} deleted "
                       f"({', '.join(doc['commitlog_files_deleted'])})")
    if shortened:
        entries = sum(q["entries_cut"] for q in shortened)
        removed.append(f"{_n(len(shortened), 'ConsumeQueue')} shortened by {_n(entries, 'entry', 'entries')} in all")
    if doc["index_files_deleted"]:
        removed.append(f"{_n(len(doc['index_files_deleted']), 'IndexFile')} deleted and rebuilt from the log")
    if removed:
        out.append("The restart also changes the store: " + "; ".join(removed) + ".")
    if lost["messages"]:
        named = _named(lost["topics"])
        out.append(f"The {_n(lost['messages'], 'message')} lost are valid, CRC-correct records stored "
                   f"{_when(lost['first_store_time'])} .. {_when(lost['last_store_time'])} (physical offsets "
                   f"{lost['first_physical_offset']:,} .. {lost['last_physical_offset']:,}; topics: {named}). Export "
                   f"them before restarting the broker: rocketstore recover plan {doc['store']} --output DIR.")
    else:
        out.append("No valid, CRC-correct message would be lost.")
    if unreachable["messages"]:
        named = _named(unreachable["topics"])
        out.append(f"{_n(unreachable['messages'], 'message')} at physical offsets "
                   f"{unreachable['first_physical_offset']:,} .. {unreachable['last_physical_offset']:,} (topics: "
                   f"{named}) stay in the CommitLog, but their ConsumeQueues end before them (or are gone) and the "
                   f"restart does not dispatch that part of the log again: no consumer could read them. To keep them "
                   f"readable, {unreachable['remedy']}.")
    for later in doc["later_starts"]:
        stop = later["stop"]
        out.append(f"That start leaves damage it did not read: the clean start after it reads from segment "
                   f"{later['start_file']} and stops at {stop['file']} byte {stop['file_position']:,} "
                   f"({stop['reason']}), ending the log at physical offset {later['process_offset']:,} and losing "
                   f"{_n(later['lost']['messages'], 'more valid message')}"
                   + (f" and {_n(len(later['commitlog_files_deleted']), 'segment')}"
                      if later["commitlog_files_deleted"] else "") + ".")
    if past:
        out.append(f"{_n(len(past), 'committed consumer offset')} would point past the end of its queue after the "
                   "restart; the broker moves such a consumer back to the queue's end, and it skips messages "
                   "written meanwhile.")
    return headline, out


def queue_offsets_lost(q: dict) -> str:
    """The queue offsets a lost-queue row covers (its PREPARED/ROLLBACK records have none)."""
    if q["first_queue_offset"] is None:
        return "none (transaction records without queue entries)"
    return f"{q['first_queue_offset']} .. {q['last_queue_offset']}"
