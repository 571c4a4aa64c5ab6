"""The audit as one self-contained HTML file (driver or CLI; ``rocketstore audit --html FILE``).

One section per store: summary cards, the recovery verdict in plain words, the CommitLog strip (valid,
damaged and would-be-lost ranges, how far ConsumeQueues and IndexFiles reach), messages and bytes per topic
over time, ConsumeQueue coverage, consumer lag per group and queue, and the findings — counted per check,
the first MAX_PER_CHECK of each in full — whose check ids link to the catalogue entries embedded at the end
of the page. Charts are Plotly figures (``report.html_charts``) with plotly.js inlined once: the file loads
nothing from anywhere. Every string from a store is HTML-escaped. Tables are bounded (MAX_ROWS rows, each
says how many it leaves out), so a huge store gives a page of bounded size.
"""
from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from html import escape

from rocketstore_spark.checks import CHECKS, Severity
from rocketstore_spark.recovery.report import harmful
from rocketstore_spark.report import html_charts as charts
from rocketstore_spark.report.recovery_text import queue_offsets_lost, recovery_in_words
from rocketstore_spark.report.text import cell
from rocketstore_spark.report.timeline import Timeline, topic_timeline
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.indexes import read_index_file
from rocketstore_spark.verify.store import StoreVerdict

MAX_PER_CHECK = 20
MAX_ROWS = 200
_ORDER = {"error": 0, "warning": 1, "info": 2}
WRAPPED = {"topic", "group", "message", "stops because", "queue", "file"}


@dataclass
class StorePage:
    """What the report shows of one store: the verify verdict, the recovery report document (None for a
    bare CommitLog directory), the topic timeline, the segments' sizes and the IndexFiles' headers."""
    verdict: StoreVerdict
    recovery: dict | None
    timeline: Timeline
    segments: list[dict]            # file, base_offset, size, data_end
    index_files: list[dict]         # file, entries, begin_phy_offset, end_phy_offset


def gather(layout: StoreLayout, verdict: StoreVerdict, recovery: dict | None) -> StorePage:
    """The page of one audited store: adds to the audit's results what only the files give (sizes, IndexFile
    headers) and the topic timeline over the store's time range (one decode of three columns)."""
    scans = dict(verdict.segments)
    times = [t for s in scans.values() for t in (s.first_store_timestamp, s.last_store_timestamp) if t is not None]
    timeline = topic_timeline(layout, min(times, default=0), max(times, default=0))
    segments = [{"file": os.path.basename(s.path), "base_offset": s.base_offset, "size": s.size,
                 "data_end": scans[os.path.basename(s.path)].data_end} for s in layout.segments]
    g = verdict.settings.geometry
    index = []
    for p in layout.files.index_files():
        v = read_index_file(str(p), g.hash_slot_num if g else None)
        index.append({"file": p.name, "entries": v.entry_count, "begin_phy_offset": v.header["begin_phy_offset"],
                      "end_phy_offset": v.header["end_phy_offset"]})
    return StorePage(verdict, recovery, timeline, segments, index)


def render_html(pages: list[StorePage], title: str = "RocketMQ store audit") -> str:
    """The report of ``pages`` as one HTML document."""
    from plotly.offline import get_plotlyjs
    used = sorted({f.check for p in pages for f in p.verdict.findings})
    body = [f"<h1>{escape(title)}</h1>",
            f"<p class=note>Written {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC by rocketstore-spark "
            "from the store files alone (read-only; no broker). Times are store times in UTC.</p>"]
    if len(pages) > 1:
        body.append("<ul>" + "".join(f"<li><a href='#store-{k}'>{escape(p.verdict.store)}</a></li>"
                                     for k, p in enumerate(pages)) + "</ul>")
    body += [_store_section(k, p) for k, p in enumerate(pages)]
    body.append(_catalogue(used))
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<title>{escape(title)}</title><style>{_CSS}</style>"
            f"<script>{get_plotlyjs()}</script></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n")


def write_html(path: str, pages: list[StorePage], title: str = "RocketMQ store audit") -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_html(pages, title))


# ------------------------------------------------------------------------------------------ sections

def _store_section(k: int, p: StorePage) -> str:
    v, rec = p.verdict, p.recovery
    counts = {s: sum(1 for f in v.findings if str(f.severity) == s) for s in _ORDER}
    risky = counts["error"] or counts["warning"] or bool(rec and harmful(rec))
    return "\n".join([
        f"<section id='store-{k}' class=store data-store='{escape(v.store)}'>",
        f"<h2>{escape(v.store)} <span class='badge {'bad' if risky else 'good'}'>"
        f"{'problems found' if risky else 'healthy'}</span></h2>", _cards(p, counts),
        _restart(rec), _commitlog(k, p), _topics(k, p.timeline), _queues(k, v, rec),
        "<h3>Consumer lag</h3>", _lag(k, v), "<h3>Findings</h3>", _findings(v), "</section>"])


def _restart(rec: dict | None) -> str:
    if rec is None:
        return "<p class=note>A bare CommitLog directory: no recovery to simulate.</p>"
    headline, sentences = recovery_in_words(rec)
    out = ["<h3>What the broker's next start would do</h3>",
           f"<p class='verdict {'bad' if harmful(rec) else 'good'}' data-fact=verdict>{escape(headline)}</p>",
           "<ul class=words>" + "".join(f"<li>{escape(s)}</li>" for s in sentences) + "</ul>"]
    if rec["lost"]["queues"]:
        out.append(_table("lost", ["topic", "queue", "messages lost", "queue offsets"],
                          [(q["topic"], q["queue_id"], q["messages"], queue_offsets_lost(q))
                           for q in rec["lost"]["queues"]], numeric={1, 2}))
    return "\n".join(out)


def commitlog_strip(p: StorePage):
    """The CommitLog strip of one store's page (``html_charts.segment_strip``): its segments, the first
    MAX_ROWS damaged records, where the next start ends the log and how far the queues and IndexFiles reach."""
    v, rec = p.verdict, p.recovery
    damaged = [{"physical_offset": f.physical_offset, "check": f.check} for f in v.findings
               if f.physical_offset is not None and f.check.startswith("commitlog.") and f.severity == Severity.ERROR]
    return charts.segment_strip(p.segments, damaged[:MAX_ROWS], rec["process_offset"] if rec else None,
                                v.log.end, rec["max_cq"] if rec else None, p.index_files)


def coverage_rows(v: StoreVerdict, rec: dict | None) -> list[dict]:
    """Per ConsumeQueue the rows ``html_charts.queue_coverage`` draws: where its files end, where the
    CommitLog's dispatch ends it, and where the next start leaves it (None without a recovery report)."""
    after = {(q["topic"], q["queue_id"]): q["max_offset"] for q in rec["consumequeues"]} if rec else {}
    return [{"topic": q.topic, "queue_id": q.queue_id, "max_offset": q.max_offset,
             "dispatch_max_offset": q.dispatch_max_offset, "after_restart": after.get((q.topic, q.queue_id))}
            for q in v.queues]


def _commitlog(k: int, p: StorePage) -> str:
    v = p.verdict
    strip = commitlog_strip(p)
    size = {s["file"]: s["size"] for s in p.segments}
    return "\n".join([
        "<h3>The CommitLog</h3>",
        "<p class=note>Green: valid records; orange: data the next start would cut; grey: BLANK padding, zero "
        "fill and pre-allocated space; red crosses: damaged records. Below: how far the ConsumeQueues point "
        "into the log, and the range each IndexFile covers.</p>",
        _chart(f"strip-{k}", "strip", strip),
        _table("segments", ["segment", "base offset", "size", "records", "data ends at", "stops because",
                            "CRC failures", "findings"],
               [(name, int(name), size.get(name), s.records, s.data_end, s.stop_reason, s.crc_failures,
                 len(s.findings)) for name, s in v.segments], numeric={1, 2, 3, 4, 6, 7})])


def timeline_figure(tl: Timeline):
    """Messages and bytes per topic over time (``html_charts.topic_timeline``) of ``tl``: the TOP_TOPICS
    topics with the most messages, the others summed."""
    totals = tl.totals.to_pylist()
    top = [t["topic"] for t in totals[:charts.TOP_TOPICS]]
    return charts.topic_timeline(tl.top_series(charts.TOP_TOPICS).to_pydict(), top, len(totals) - len(top),
                                 tl.width_ms)


def _topics(k: int, tl: Timeline) -> str:
    totals = tl.totals.to_pylist()
    return "\n".join([
        "<h3>Messages and bytes per topic over time</h3>",
        f"<p class=note>Store time (UTC) in buckets of {charts.duration(tl.width_ms)}; the {charts.TOP_TOPICS} "
        "topics with the most messages, the others summed; bytes are whole records on disk.</p>",
        _chart(f"timeline-{k}", "timeline", timeline_figure(tl)) if totals else "<p>No records.</p>",
        _table("topics", ["topic", "messages", "bytes", "first store time", "last store time"],
               [(t["topic"], t["messages"], t["bytes"], _time(t["first_ms"]), _time(t["last_ms"])) for t in totals],
               numeric={1, 2})])


def _queues(k: int, v: StoreVerdict, rec: dict | None) -> str:
    if not v.queues:
        return "<h3>ConsumeQueue coverage</h3><p>No ConsumeQueue.</p>"
    queues = coverage_rows(v, rec)
    behind = sum(1 for q in queues if q["max_offset"] != q["dispatch_max_offset"])
    shortened = sum(1 for q in queues if q["after_restart"] is not None and q["after_restart"] < q["max_offset"])
    return "\n".join([
        "<h3>ConsumeQueue coverage</h3>",
        f"<p data-fact=queues>{behind:,} of {len(queues):,} queue(s) end elsewhere than the CommitLog says; "
        f"{shortened:,} would be shortened by the next start. The chart shows the "
        f"{min(len(queues), charts.MAX_BARS)} queue(s) where these differ most.</p>",
        _chart(f"queues-{k}", "queues", charts.queue_coverage(queues))])


def _cards(p: StorePage, counts: dict) -> str:
    v, rec = p.verdict, p.recovery
    scans = [s for _, s in v.segments]
    times = [t for s in scans for t in (s.first_store_timestamp, s.last_store_timestamp) if t is not None]
    lost = rec["lost"]["messages"] if rec else None
    cards = [("RocketMQ", v.settings.release_label, v.settings.sources.get("rocketmqVersion", "")),
             ("messages", f"{sum(s.records for s in scans):,}",
              f"{len(p.timeline.totals):,} topic(s), {len(v.queues):,} queue(s)"),
             ("CommitLog", f"{v.log.end - v.log.min_offset:,} bytes",
              f"{len(scans)} segment(s), physical offsets {v.log.min_offset:,} .. {v.log.end:,}"),
             ("store time", _time(min(times)) if times else "-", f"to {_time(max(times))}" if times else ""),
             ("findings", f"{counts['error']:,} error(s)",
              f"{counts['warning']:,} warning(s), {counts['info']:,} info"),
             ("a restart now", "-" if lost is None else f"loses {lost:,} message(s)",
              "" if rec is None else f"{rec['shutdown']} start, log ends at {rec['process_offset'] or 0:,}")]
    return "<div class=cards>" + "".join(
        f"<div class=card data-card='{escape(name)}'><div class=label>{escape(name)}</div>"
        f"<div class=value>{escape(value)}</div><div class=sub>{escape(sub or '')}</div></div>"
        for name, value, sub in cards) + "</div>"


def _lag(k: int, v: StoreVerdict) -> str:
    lags = v.offsets.lags if v.offsets else []
    if not lags:
        return "<p>No committed consumer offsets (config/consumerOffset.json) in this store.</p>"
    rows = [x.__dict__ for x in lags]
    ordered = sorted(rows, key=lambda x: (x["status"] in ("in_range", "caught_up"), -(x["lag"] or 0)))
    return "\n".join([
        f"<p class=note>From {escape(os.path.basename(v.offsets.source or ''))}. Lag: the messages from where the "
        "group reads next (its committed offset; the queue's min offset when the messages before it expired "
        "unconsumed: below_min) to the queue's max offset; beyond_max: the committed offset is past the queue's "
        "end. The chart shows the queues that lag.</p>",
        _chart(f"lag-{k}", "lag", charts.consumer_lag(rows)) if any(x["lag"] for x in rows) else
        "<p>Every group is caught up.</p>",
        _table("lag", ["group", "topic", "queue", "committed offset", "min offset", "max offset", "status", "lag",
                       "oldest unconsumed"],
               [(x["consumer_group"], x["topic"], x["queue_id"], x["consumer_offset"], x["min_offset"],
                 x["max_offset"], x["status"], x["lag"], _time(x["oldest_unconsumed_timestamp"])) for x in ordered],
               numeric={2, 3, 4, 5, 7})])


def _findings(v: StoreVerdict) -> str:
    if not v.findings:
        return "<p data-fact=no-findings>No findings: every check passed.</p>"
    by_check: dict[str, list] = {}
    for f in sorted(v.findings, key=lambda f: _ORDER[str(f.severity)]):
        by_check.setdefault(f.check, []).append(f)
    out = [_table("checks", ["check", "severity", "findings", "area"],
                  [(_Link(c), str(fs[0].severity), len(fs), CHECKS[c].area) for c, fs in by_check.items()],
                  numeric={2}),
           f"<p class=note>The first {MAX_PER_CHECK} findings of each check; the counts above are complete "
           "(rocketstore audit --json has every finding).</p>"]
    rows = [(str(f.severity), _Link(f.check), f.file, f.file_position, f.physical_offset,
             f"{f.topic} / {f.queue_id}" if f.topic is not None else None, f.queue_offset, f.message)
            for fs in by_check.values() for f in fs[:MAX_PER_CHECK]]
    out.append(_table("findings", ["severity", "check", "file", "byte", "physical offset", "queue", "queue offset",
                                   "message"], rows, numeric={3, 4, 6}, limit=MAX_PER_CHECK * len(by_check)))
    return "\n".join(out)


def _catalogue(used: list[str]) -> str:
    if not used:
        return ""
    out = ["<section class=catalogue><h2>The checks found above</h2>",
           "<p class=note>From rocketstore-spark's catalogue of checks (docs/checks.md): what is checked, what "
           "RocketMQ itself does in that situation, and what to do.</p>"]
    for c in (CHECKS[i] for i in used):
        out.append(f"<div class=check id='check-{escape(c.id)}'><h4><code>{escape(c.id)}</code> "
                   f"<span class=sev-{c.severity}>{c.severity}</span> · {escape(c.area)}</h4><dl>"
                   f"<dt>rule</dt><dd>{escape(c.rule)}</dd><dt>what RocketMQ does</dt><dd>{escape(c.rocketmq)}</dd>"
                   f"<dt>what we do, the repair</dt><dd>{escape(c.action)}</dd></dl></div>")
    out.append("</section>")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------ helpers

class _Link(str):
    """A check id rendered as a link to its catalogue entry."""


def _cell(value) -> str:
    if isinstance(value, _Link):
        return f"<a href='#check-{escape(value)}'><code>{escape(value)}</code></a>"
    return escape(cell(value))


def _table(name: str, headers: list[str], rows: list, numeric=frozenset(), limit: int = MAX_ROWS) -> str:
    """An HTML table of at most ``limit`` rows (it says how many it leaves out); ``numeric``: column
    indexes aligned right; columns named in WRAPPED wrap, the others stay on one line."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    kinds = [" class=num" if i in numeric else " class=wrap" if h in WRAPPED else "" for i, h in enumerate(headers)]
    body = "".join("<tr>" + "".join(f"<td{kinds[i]}>{_cell(c)}</td>" for i, c in enumerate(r)) + "</tr>"
                   for r in rows[:limit])
    more = f"<p class=note>… and {len(rows) - limit:,} more row(s) not shown.</p>" if len(rows) > limit else ""
    return f"<table class=data data-table='{name}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def _chart(div_id: str, kind: str, fig) -> str:
    html = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, default_width="100%",
                       config={"displaylogo": False, "responsive": True})
    return f"<div class=chart data-chart='{kind}'>{html}</div>"


def _time(ms) -> str | None:
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S.%f")[:-3]


_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:1200px;
 color:#212121;padding:0 16px;overflow-wrap:anywhere}
h1{font-size:1.6em}h2{border-bottom:2px solid #e0e0e0;padding-bottom:4px;margin-top:40px;word-break:break-all}
h3{margin-top:28px}.note{color:#616161;font-size:.9em}
.badge{font-size:.6em;padding:2px 8px;border-radius:10px;color:white;vertical-align:middle}
.badge.bad{background:#c62828}.badge.good{background:#2e7d32}
.cards{display:flex;flex-wrap:wrap;gap:12px}.card{border:1px solid #e0e0e0;border-radius:8px;padding:10px 14px;
 min-width:160px;flex:1}.card .label{color:#757575;font-size:.8em;text-transform:uppercase}
.card .value{font-size:1.3em;font-weight:600;margin:4px 0}.card .sub{color:#616161;font-size:.85em}
.verdict{font-size:1.2em;font-weight:600;padding:8px 12px;border-radius:6px}
.verdict.bad{background:#fff3e0;border-left:6px solid #ef6c00}.verdict.good{background:#e8f5e9;
 border-left:6px solid #2e7d32}
table.data{border-collapse:collapse;font-size:.85em;margin:8px 0;width:100%}
table.data th,table.data td{border-bottom:1px solid #eeeeee;padding:3px 8px;text-align:left;
 vertical-align:top;white-space:nowrap}table.data td.wrap{white-space:normal;overflow-wrap:anywhere;min-width:8em}
table.data td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.data th{background:#fafafa}.chart{margin:8px 0}
.check{border-left:4px solid #e0e0e0;padding:2px 12px;margin:12px 0}.check:target{border-color:#1565c0;
 background:#e3f2fd}dt{font-weight:600;color:#616161}dd{margin:0 0 6px 0}
.sev-error{color:#c62828}.sev-warning{color:#ef6c00}.sev-info{color:#757575}
"""
