"""The verify report as plain text (driver): per store a header, counts per check, the findings that matter
first (errors, then warnings, then info; capped, with a count of the rest), consumer lag and a reset plan.
"""
from __future__ import annotations

import datetime as dt

from rocketstore_spark.report.text import render_table

MAX_FINDINGS = 60
MAX_LAG_ROWS = 60
_ORDER = {"error": 0, "warning": 1, "info": 2}


def _time(ms: int | None) -> str | None:
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S.%f")[:-3]


def render_store(rep) -> str:
    """One ``spark.verify.StoreReport`` as text."""
    s = rep.settings
    out = [f"Store {rep.store}",
           f"  RocketMQ {s.release_label} ({s.sources.get('rocketmqVersion', '')})",
           f"  CommitLog: {rep.segments} segment(s), {rep.records:,} records, physical offsets "
           f"{rep.log.min_offset:,} .. {rep.log.end:,}; BODYCRC failures {rep.crc_failures:,}, __CRC32# property "
           f"failures {rep.properties_crc_failures:,}",
           f"  {len(rep.queues)} queue(s), {rep.index_files} IndexFile(s) checked; verdict: {rep.worst}"]
    counts = rep.counts()
    if counts:
        out += ["", render_table(["check", "severity", "findings"],
                                 [(c, sev, n) for (c, sev), n in sorted(counts.items(),
                                                                       key=lambda kv: (_ORDER[kv[0][1]], kv[0][0]))],
                                 numeric={"findings"})]
        ranked = sorted(rep.findings, key=lambda f: _ORDER[str(f.severity)])
        shown = ranked[:MAX_FINDINGS]
        out += ["", render_table(
            ["severity", "check", "file", "byte", "physical offset", "queue", "queue offset", "message"],
            [(str(f.severity), f.check, f.file, f.file_position, f.physical_offset,
              f"{f.topic}/{f.queue_id}" if f.topic is not None else None, f.queue_offset, f.message) for f in shown],
            numeric={"byte", "physical offset", "queue offset"}, max_width=160)]
        if len(ranked) > len(shown):
            out.append(f"  ... and {len(ranked) - len(shown)} more finding(s) (all of them in --json and the Delta "
                       "table)")
    lags = rep.offsets.lags if rep.offsets else []
    if lags:
        ordered = sorted(lags, key=lambda x: (x.status == "in_range" or x.status == "caught_up", -(x.lag or 0)))
        out += ["", f"Consumer offsets ({rep.offsets.source})", render_table(
            ["group", "topic", "queue", "offset", "min", "max", "status", "lag", "oldest unconsumed", "lag (s)"],
            [(x.consumer_group, x.topic, x.queue_id, x.consumer_offset, x.min_offset, x.max_offset, x.status,
              x.lag, _time(x.oldest_unconsumed_timestamp), None if x.lag_ms is None else round(x.lag_ms / 1000, 3))
             for x in ordered[:MAX_LAG_ROWS]],
            numeric={"queue", "offset", "min", "max", "lag", "lag (s)"})]
        if len(ordered) > MAX_LAG_ROWS:
            out.append(f"  ... and {len(ordered) - MAX_LAG_ROWS} more queue(s)")
    return "\n".join(out)


def render_plan(plan: list[dict], how: str) -> str:
    if not plan:
        return f"Reset plan ({how}): nothing to move"
    return f"Reset plan ({how}; not applied — for the operator to run):\n" + render_table(
        ["store", "group", "topic", "queue", "current", "new"],
        [(p["store"], p["consumer_group"], p["topic"], p["queue_id"], p["current_offset"], p["new_offset"])
         for p in plan], numeric={"queue", "current", "new"})
