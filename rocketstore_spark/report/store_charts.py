"""Figures of what a store holds, beside the HTML report's own (``report.html_charts``, whose layout, colours
and label escaping they share): the topic mix, power-of-two histograms (message sizes, store-minus-born
latency), the messages a restart would lose per queue, and consumer lag across snapshots. The notebooks in
notebooks/ draw with these and with html_charts, so a chart looks and counts the same there as in the report.

Pure, like html_charts: rows in (already aggregated, by Spark or the package), a Plotly figure out; each
bounded (TOP_TOPICS topics, MAX_BARS queues), so a huge store gives a figure of the same size.
"""
from __future__ import annotations

import datetime as dt

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rocketstore_spark.report.html_charts import LAYOUT, COLOURS, MAX_BARS, PALETTE, TOP_TOPICS, escape


def others(count: int) -> str:
    """The label of the topics beyond TOP_TOPICS, summed."""
    return f"{count:,} other topics"


def topic_mix(totals: list[dict]) -> go.Figure:
    """Messages and record bytes per topic, side by side: the TOP_TOPICS topics with the most messages, the
    rest summed in one bar. ``totals``: topic, messages, bytes (``Timeline.totals`` rows, or a Spark
    group-by), in any order."""
    ranked = sorted(totals, key=lambda t: (-t["messages"], t["topic"]))
    shown, rest = ranked[:TOP_TOPICS], ranked[TOP_TOPICS:]
    names = [escape(t["topic"]) for t in shown]
    messages, size = [t["messages"] for t in shown], [t["bytes"] for t in shown]
    if rest:
        names.append(others(len(rest)))
        messages.append(sum(t["messages"] for t in rest))
        size.append(sum(t["bytes"] for t in rest))
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=("messages", "record bytes"))
    fig.add_trace(go.Bar(name="messages", orientation="h", y=names, x=messages, marker_color=COLOURS["index"]),
                  row=1, col=1)
    fig.add_trace(go.Bar(name="record bytes", orientation="h", y=names, x=size, marker_color=COLOURS["queues"]),
                  row=1, col=2)
    fig.update_layout(**LAYOUT, showlegend=False, height=max(260, 80 + 24 * len(names)))
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig


def log2_bucket(value: int) -> int:
    """The power-of-two bucket of ``value``: 0 for 0, else ±2^k with 2^k <= |value| < 2^(k+1). The notebooks
    compute the same in Spark (``sign(v) * 2^floor(log2(|v|))``); negative values are kept apart (a
    store-minus-born latency below 0 is a born host's clock ahead of the broker's)."""
    if value == 0:
        return 0
    magnitude = 1 << (abs(value).bit_length() - 1)
    return magnitude if value > 0 else -magnitude


def bucket_label(bucket: int, unit: str) -> str:
    """``bucket`` (a ``log2_bucket``) as the range it holds: "0 B", "1 B", "512..1,023 B", "-2..-3 ms"."""
    if abs(bucket) <= 1:
        return f"{bucket} {unit}"
    far = bucket * 2 - (1 if bucket > 0 else -1)
    return f"{bucket:,}..{far:,} {unit}"


def log2_histogram(rows: list[dict], unit: str, title: str) -> go.Figure:
    """Counts per power-of-two bucket, stacked by topic (TOP_TOPICS topics by count, the rest summed): message
    sizes, latencies. ``rows``: topic, bucket (a ``log2_bucket``), count; ``unit``: of the values ("B",
    "ms"); ``title``: the x axis'. Buckets in value order, each labelled with its range."""
    per_topic: dict[str, int] = {}
    for r in rows:
        per_topic[r["topic"]] = per_topic.get(r["topic"], 0) + r["count"]
    ranked = sorted(per_topic, key=lambda t: (-per_topic[t], t))
    top = set(ranked[:TOP_TOPICS])
    folded = others(len(ranked) - len(top))
    series: dict[str, dict[int, int]] = {t: {} for t in ranked[:TOP_TOPICS]}
    for r in rows:
        name = r["topic"] if r["topic"] in top else folded
        counts = series.setdefault(name, {})
        counts[r["bucket"]] = counts.get(r["bucket"], 0) + r["count"]
    buckets = sorted({r["bucket"] for r in rows})
    labels = [bucket_label(b, unit) for b in buckets]
    fig = go.Figure()
    for k, (name, counts) in enumerate(series.items()):
        xs = [b for b in buckets if b in counts]
        fig.add_trace(go.Bar(name=name if name == folded else escape(name), x=[bucket_label(b, unit) for b in xs],
                             y=[counts[b] for b in xs], marker_color=PALETTE[k % len(PALETTE)]))
    fig.update_layout(**LAYOUT, barmode="stack", height=420, bargap=0.05, xaxis_title=title,
                      yaxis_title="messages")
    # every bucket in value order, also those a topic lacks (Plotly would order categories by first sight)
    fig.update_xaxes(categoryorder="array", categoryarray=labels)
    return fig


def lost_per_queue(queues: list[dict]) -> go.Figure:
    """The messages a restart would lose, per queue (the recovery report's ``lost.queues``: topic, queue_id,
    messages, first_queue_offset, last_queue_offset): the MAX_BARS queues losing most."""
    shown = sorted(queues, key=lambda q: (-q["messages"], q["topic"], q["queue_id"]))[:MAX_BARS]
    fig = go.Figure(go.Bar(
        name="messages lost", orientation="h", y=[f"{escape(q['topic'])} / {q['queue_id']}" for q in shown],
        x=[q["messages"] for q in shown], marker_color=COLOURS["lost"],
        hovertext=[f"queue offsets {q['first_queue_offset']:,} .. {q['last_queue_offset']:,}" for q in shown]))
    fig.update_layout(**LAYOUT, height=max(260, 80 + 22 * len(shown)), xaxis_title="messages lost")
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig


def lag_history(rows: list[dict]) -> go.Figure:
    """Consumer lag over time: per consumer group the messages behind (summed over its queues) at each
    snapshot, one line a group (the TOP_TOPICS groups with the largest latest lag). ``rows``: run_time (a
    datetime, or ms since the epoch), consumer_group, lag (None counts 0: an unknown queue)."""
    total: dict[str, dict] = {}
    for r in rows:
        when = r["run_time"]
        when = dt.datetime.fromtimestamp(when / 1000, dt.timezone.utc) if isinstance(when, int) else when
        per = total.setdefault(r["consumer_group"], {})
        per[when] = per.get(when, 0) + (r["lag"] or 0)
    latest = {g: per[max(per)] for g, per in total.items()}
    groups = sorted(total, key=lambda g: (-latest[g], g))[:TOP_TOPICS]
    fig = go.Figure([go.Scatter(name=escape(g), mode="lines+markers", x=sorted(total[g]),
                                y=[total[g][t] for t in sorted(total[g])], line_color=PALETTE[k % len(PALETTE)])
                     for k, g in enumerate(groups)])
    fig.update_layout(**LAYOUT, height=380, yaxis_title="messages behind", xaxis_title="snapshot time (UTC)")
    return fig
