"""The notebooks in notebooks/ run end to end in a real Jupyter kernel (nbclient, ipykernel) against the bundled
sample stores, and the figures they show hold what RocketMQ wrote (the golden manifests), not merely a figure.

One kernel runs all three notebooks in turn, so Spark starts once for them (the kernel's own JVM: a kernel is a
process of its own and cannot share the tests' session). The kernel imports this checkout's package (its
PYTHONPATH leads with the repository). The executed notebooks are kept in build/artifacts/notebooks/ for CI.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from rocketstore_spark.report.html_charts import _utc as utc, escape
from rocketstore_spark.report.timeline import bucket_width
from rocketstore_spark.report.store_charts import bucket_label, log2_bucket
from tests.golden.goldens import BY_ID, committed_offsets

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ARTIFACTS = ROOT / "build" / "artifacts" / "notebooks"
NAMES = ("explore_store.ipynb", "consumer_lag.ipynb", "crash_walkthrough.ipynb")
CELL_TIMEOUT = 300          # s: the first Spark cell starts the JVM on a loaded 2-core machine


def test_the_notebooks_are_the_three():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebooks_are_stripped(name):
    """Git holds notebooks without outputs: a diff shows code, not megabytes of plotly.js, and no output of one
    person's run (paths, data of a store) is committed."""
    nb = json.loads((NOTEBOOKS / name).read_text())
    dirty = [k for k, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert dirty == [], f"{name}: code cells {dirty} have outputs or execution counts: clear them before committing"


@pytest.fixture(scope="module")
def executed():
    """name -> the notebook as executed by one kernel, in order."""
    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env, cwd=str(NOTEBOOKS))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    out = {}
    try:
        for name in NAMES:
            nb = nbformat.read(NOTEBOOKS / name, as_version=4)
            # the kernel stays up between notebooks (a client given a kernel manager leaves it running)
            NotebookClient(nb, km=km, timeout=CELL_TIMEOUT, resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
            nbformat.write(nb, ARTIFACTS / name)
            out[name] = nb
    finally:
        km.shutdown_kernel(now=True)
    return out


def figures(nb) -> dict[str, dict]:
    """Tag (a code cell's ``figure:NAME`` tag) -> the Plotly figure the cell displayed (its JSON)."""
    out = {}
    for cell in nb.cells:
        tags = [t.removeprefix("figure:") for t in cell.metadata.get("tags", []) if t.startswith("figure:")]
        if tags:
            shown = [o["data"]["application/vnd.plotly.v1+json"] for o in cell.outputs
                     if "application/vnd.plotly.v1+json" in o.get("data", {})]
            assert len(shown) == 1, f"cell tagged {tags} shows {len(shown)} figures"
            out[tags[0]] = shown[0]
    return out


def text(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def bars(fig: dict, orientation: str = "v") -> dict[str, dict]:
    """Trace name -> {category: value} of a figure's bar traces."""
    return {t.get("name"): dict(zip(t["y"], t["x"])) if orientation == "h" else dict(zip(t["x"], t["y"]))
            for t in fig["data"] if t["type"] == "bar"}


def stacked(fig: dict) -> Counter:
    """Each category of a stacked bar chart, its traces summed."""
    total = Counter()
    for trace in bars(fig).values():
        total.update(trace)
    return total


@pytest.mark.spark
@pytest.mark.long
def test_explore_store(executed):
    nb = executed["explore_store.ipynb"]
    shown, out = figures(nb), text(nb)
    messages = BY_ID["5.5.1/clean"].messages
    by_topic = Counter(m["topic"] for m in messages)
    assert all(topic in out for topic in by_topic)
    assert "BLANK end-of-file record" in out                   # the segments table: why each segment's data ends
    # the topic mix: the top ten topics and the rest summed, messages and record bytes
    ranked = sorted(by_topic, key=lambda t: (-by_topic[t], t))
    size = Counter()
    for m in messages:
        size[m["topic"]] += m["total_size"]
    mix = [dict(zip(t["y"], t["x"])) for t in shown["topic_mix"]["data"]]
    rest = ranked[10:]
    assert not rest                         # ten topics: none summed under "others"
    assert mix == [{escape(t): by_topic[t] for t in ranked}, {escape(t): size[t] for t in ranked}]
    # message sizes and store-minus-born latency: every message in its power-of-two bucket
    assert stacked(shown["sizes"]) == Counter(bucket_label(log2_bucket(m["body_length"]), "B") for m in messages)
    assert stacked(shown["latency"]) == Counter(
        bucket_label(log2_bucket(m["store_timestamp"] - m["born_timestamp"]), "ms") for m in messages)
    # traffic over time: every message in one bucket, record bytes likewise
    # traffic over time: each topic's messages per store-time bucket (the timeline's widths, from the first
    # store time), in the upper chart; record bytes summed in the lower
    timeline = shown["timeline"]["data"]
    first, last = min(m["store_timestamp"] for m in messages), max(m["store_timestamp"] for m in messages)
    width = bucket_width(first, last)
    per_bucket = Counter((escape(m["topic"]), utc(first + (m["store_timestamp"] - first) // width * width))
                         for m in messages)
    assert Counter({(t["name"], x): y for t in timeline if t["yaxis"] == "y" for x, y in zip(t["x"], t["y"])}) \
        == per_bucket
    assert sum(sum(t["y"]) for t in timeline if t["yaxis"] == "y2") == sum(size.values())


@pytest.mark.spark
@pytest.mark.long
def test_consumer_lag(executed):
    nb = executed["consumer_lag.ipynb"]
    shown = figures(nb)
    g = BY_ID["5.5.1/consumer-offsets"]
    # lag as the broker counts it: max offset - the offset it reads next (an offset out of range moves to the
    # queue's min or max first); the chart draws every queue that lags
    want, per_group = {}, Counter()
    for (group, topic, qid), (offset, bounds, _) in committed_offsets(g).items():
        lag = 0 if bounds is None else bounds[1] - min(max(offset, bounds[0]), bounds[1])
        if lag:
            want[(escape(group), f"{escape(group)} · {escape(topic)} / {qid}")] = lag
            per_group[escape(group)] += lag
    assert {(t["name"], label): lag for t in shown["lag"]["data"] for label, lag in zip(t["y"], t["x"])} == want
    # without an ingest's history: one snapshot, each group's lag summed over its queues
    history = {t["name"]: t["y"] for t in shown["lag_history"]["data"]}
    assert {k: v for k, v in history.items() if v != [0]} == {k: [v] for k, v in per_group.items()}


@pytest.mark.spark
@pytest.mark.long
def test_crash_walkthrough(executed):
    nb = executed["crash_walkthrough.ipynb"]
    shown, out = figures(nb), text(nb)
    g = BY_ID["5.5.1/corrupt-body"]
    end = g.manifest["recovery"]["commitlog_max_offset"]
    lost = [m for m in g.messages if m["physical_offset"] > end and m["body_crc_ok"]]
    assert f"A restart now would lose {len(lost)} valid messages" in out
    # lost per queue: RocketMQ's own recovery of a copy ends the log at `end`; what is after it and valid is lost
    want = Counter((m["topic"], m["queue_id"]) for m in lost)
    (trace,) = shown["lost"]["data"]
    assert dict(zip(trace["y"], trace["x"])) == {f"{escape(t)} / {q}": n for (t, q), n in want.items()}
    # the CommitLog strip: the damaged records (the flipped bytes' records) and the kept data ending at `end`
    strip = {t["name"]: t for t in shown["strip"]["data"]}
    crashed = sorted(next(m for m in g.messages if m["physical_offset"] <= s["physical_offset"]
                          < m["physical_offset"] + m["total_size"])["physical_offset"] for s in g.manifest["surgery"])
    assert sorted(strip["damaged record"]["x"]) == crashed
    valid = strip["valid data"]
    assert max(b + x for b, x in zip(valid["base"], valid["x"])) == end
    # the queues after the restart: where RocketMQ's own recovery of a copy left them (the manifest's queues)
    after = {f"{escape(q['topic'])} / {q['queue_id']}": q["max_offset"] for q in g.manifest["queues"]}
    coverage = {t["name"]: dict(zip(t["y"], t["x"])) for t in shown["queues"]["data"]}
    restart = coverage["it ends at after the next start"]
    assert restart and all(after[label] == x for label, x in restart.items())
    # the plan: export first, the lost messages read back by Spark, and the store untouched
    assert "1. export:" in out and "not one file of the store changed" in out
    assert all(str(m["physical_offset"]) in out.replace(",", "") for m in lost[:5])
