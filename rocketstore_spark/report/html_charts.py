"""The charts of the HTML report as Plotly figures (driver or CLI; pure: data in, figures out).

Every label that comes from a store (topics, groups, file names) is HTML-escaped before it reaches Plotly,
which reads labels as a subset of HTML. Each chart is bounded: at most TOP_TOPICS topics (the rest summed),
MAX_BARS queues or consumer queues, so a huge store gives a page of the same size.
"""
from __future__ import annotations

import datetime as dt
from html import escape as _escape

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rocketstore_spark.report.text import elide

TOP_TOPICS = 10
MAX_BARS = 40
LABEL_WIDTH = 48        # characters of a label (topic, group) before its middle is elided
COLOURS = {"valid": "#2e7d32", "damaged": "#c62828", "lost": "#ef6c00", "empty": "#bdbdbd", "index": "#1565c0",
           "queues": "#6a1b9a"}
PALETTE = ["#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#00838f", "#ad1457", "#5d4037", "#9e9d24", "#455a64",
           "#d84315", "#757575"]        # one colour a topic or group, in legend order
LAYOUT = dict(margin=dict(l=10, r=10, t=40, b=10), template="plotly_white", font=dict(size=12),
               legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0), barcornerradius=0)


def escape(label: str) -> str:
    """A label from the store as Plotly shows it: elided in the middle to LABEL_WIDTH, HTML-escaped."""
    return _escape(elide(label, LABEL_WIDTH))


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def segment_strip(segments: list[dict], damaged: list[dict], restart_end: int | None, log_end: int,
                  max_cq: int | None, index_files: list[dict]) -> go.Figure:
    """The CommitLog along its physical offsets: per segment the valid data, the bytes a restart would cut
    (from ``restart_end`` to the end of the data), the unused rest (BLANK padding, zero fill, pre-allocation)
    and each damaged record (``damaged``: physical_offset, check); below it how far the ConsumeQueues reach
    (``max_cq``) and each IndexFile's physical offset range. ``segments``: file, base_offset, size,
    data_end (bytes of records in the file)."""
    fig = go.Figure()
    log, cq, ix = "CommitLog", "ConsumeQueues reach", "IndexFiles"

    def bars(name, colour, row, spans, hover):
        spans = [(a, b, h) for (a, b), h in zip(spans, hover) if b > a]
        if spans:
            fig.add_trace(go.Bar(name=name, orientation="h", y=[row] * len(spans), base=[a for a, _, _ in spans],
                                 x=[b - a for a, b, _ in spans], marker_color=colour, hovertext=[h for *_, h in spans],
                                 hoverinfo="text", marker_line_width=0.5, marker_line_color="white"))

    bars("unused (BLANK padding, zero fill, pre-allocated)", COLOURS["empty"], log,
         [(s["base_offset"], s["base_offset"] + s["size"]) for s in segments],
         [f"{escape(s['file'])}: {s['size']:,} bytes" for s in segments])
    keep = restart_end if restart_end is not None else log_end
    valid = [(s["base_offset"], s["base_offset"] + min(s["data_end"], max(0, keep - s["base_offset"])))
             for s in segments]
    bars("valid data", COLOURS["valid"], log, valid,
         [f"{escape(s['file'])}: records at {a:,} .. {b:,}" for s, (a, b) in zip(segments, valid)])
    cut = [(max(keep, s["base_offset"]), s["base_offset"] + s["data_end"]) for s in segments]
    bars("cut by a restart (would-be-lost data)", COLOURS["lost"], log, cut,
         [f"{escape(s['file'])}: {a:,} .. {b:,} cut by the next start" for s, (a, b) in zip(segments, cut)])
    if max_cq is not None:
        first = segments[0]["base_offset"] if segments else 0
        bars("reached by the ConsumeQueues", COLOURS["queues"], cq, [(first, max_cq)],
             [f"ConsumeQueue entries point up to physical offset {max_cq:,}"])
    bars("covered by an IndexFile", COLOURS["index"], ix,
         [(i["begin_phy_offset"], i["end_phy_offset"]) for i in index_files],
         [f"{escape(i['file'])}: {i['entries']:,} entries, {i['begin_phy_offset']:,} .. {i['end_phy_offset']:,}"
          for i in index_files])
    if damaged:
        fig.add_trace(go.Scatter(name="damaged record", mode="markers", y=[log] * len(damaged),
                                 x=[d["physical_offset"] for d in damaged],
                                 marker=dict(symbol="x", size=14, color=COLOURS["damaged"], line=dict(width=2)),
                                 hovertext=[f"{escape(d['check'])} at physical offset {d['physical_offset']:,}"
                                            for d in damaged], hoverinfo="text"))
    fig.update_layout(**LAYOUT, barmode="overlay", height=260, xaxis_title="physical offset (bytes)")
    fig.update_yaxes(categoryorder="array", categoryarray=[ix, cq, log])
    return fig


def topic_timeline(series: dict[str, list], topics: list[str], others: int, width_ms: int) -> go.Figure:
    """Messages and record bytes per store-time bucket of ``width_ms``, stacked by topic. ``series``: columns
    topic, bucket (ms), messages, bytes, where a null topic holds the ``others`` topics summed (as
    ``Timeline.top_series`` gives); ``topics``: the named ones, in legend order."""
    per: dict[str | None, dict[int, list[int]]] = {t: {} for t in topics}
    for topic, bucket, messages, size in zip(series["topic"], series["bucket"], series["messages"], series["bytes"]):
        per.setdefault(topic, {})[bucket] = [messages, size]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.06)
    for k, (topic, buckets) in enumerate(per.items()):
        name = f"{others:,} other topics" if topic is None else escape(topic)
        xs = sorted(buckets)
        when = [_utc(b) for b in xs]
        colour = PALETTE[k % len(PALETTE)]
        fig.add_trace(go.Bar(name=name, x=when, y=[buckets[b][0] for b in xs], marker_color=colour,
                             legendgroup=name), row=1, col=1)
        fig.add_trace(go.Bar(name=name, x=when, y=[buckets[b][1] for b in xs], marker_color=colour,
                             legendgroup=name, showlegend=False), row=2, col=1)
    fig.update_layout(**LAYOUT, barmode="stack", height=520, bargap=0.05)
    fig.update_yaxes(title_text="messages", row=1, col=1)
    fig.update_yaxes(title_text="record bytes", row=2, col=1)
    return fig


def queue_coverage(queues: list[dict]) -> go.Figure:
    """Per ConsumeQueue: where its files end (max offset), where RocketMQ's dispatch of the CommitLog would
    end it, and (where known) where it ends after the broker's next start; the MAX_BARS queues where these
    differ most first. ``queues``: topic, queue_id, max_offset, dispatch_max_offset, after_restart (or
    None)."""
    def spread(q):
        ends = [q["max_offset"], q["dispatch_max_offset"]] + ([q["after_restart"]] if q["after_restart"] is not None
                                                              else [])
        return max(ends) - min(ends)
    shown = sorted(queues, key=lambda q: (-spread(q), q["topic"], q["queue_id"]))[:MAX_BARS]
    names = [f"{escape(q['topic'])} / {q['queue_id']}" for q in shown]
    bars = [("the ConsumeQueue ends at (max offset)", "max_offset", COLOURS["queues"]),
            ("the CommitLog says it ends at", "dispatch_max_offset", COLOURS["valid"])]
    if any(q["after_restart"] is not None for q in shown):
        bars.append(("it ends at after the next start", "after_restart", COLOURS["lost"]))
    fig = go.Figure([go.Bar(name=name, y=names, x=[q[key] for q in shown], orientation="h", marker_color=colour)
                     for name, key, colour in bars])
    fig.update_layout(**LAYOUT, barmode="group", height=max(260, 80 + 12 * len(bars) * len(shown)),
                      xaxis_title="queue offset")
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig


def consumer_lag(lags: list[dict]) -> go.Figure:
    """Messages not yet consumed per consumer group and queue: the MAX_BARS largest lags above 0. ``lags``:
    consumer_group, topic, queue_id, lag."""
    shown = sorted((x for x in lags if x["lag"]), key=lambda x: -x["lag"])[:MAX_BARS]
    fig = go.Figure()
    for group in dict.fromkeys(x["consumer_group"] for x in shown):
        rows = [x for x in shown if x["consumer_group"] == group]
        fig.add_trace(go.Bar(name=escape(group), orientation="h", x=[x["lag"] for x in rows],
                             y=[f"{escape(x['consumer_group'])} · {escape(x['topic'])} / {x['queue_id']}"
                                for x in rows]))
    fig.update_layout(**LAYOUT, height=max(260, 80 + 22 * len(shown)), xaxis_title="messages behind")
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig


def duration(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"
