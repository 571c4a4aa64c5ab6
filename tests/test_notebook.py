"""The notebook's code cells run top to bottom against the bundled sample store (real Spark)."""
import json
from collections import Counter
from pathlib import Path

import pytest

from tests.golden.goldens import BY_ID

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "explore_store.ipynb"


@pytest.mark.spark
def test_notebook_cells_run(spark, monkeypatch, capsys):
    monkeypatch.chdir(NOTEBOOK.parent)
    cells = [c for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    from pyspark.sql import functions as F
    namespace = {}
    for cell in cells:
        exec(compile("".join(cell["source"]), str(NOTEBOOK), "exec"), namespace)
    out = capsys.readouterr().out
    golden = BY_ID["5.5.1/clean"]
    # the notebook's frames hold what RocketMQ wrote (the golden manifest), and its tables show them
    by_topic = Counter(m["topic"] for m in golden.messages)
    assert {r.topic: r.cnt for r in namespace["msgs"].groupBy("topic").agg(F.count("*").alias("cnt")).collect()} \
        == by_topic
    assert all(topic in out for topic in by_topic)
    queues = {(r.topic, r.queue_id): r.max_offset for r in namespace["bounds"].collect()}
    assert queues == {(t, q): n for (t, q), n in
                      Counter((m["topic"], m["queue_id"]) for m in golden.messages
                              if m["transaction_type"] in (0, 8)).items()}     # TRANSACTION_NOT_TYPE, COMMIT_TYPE
    assert "BLANK end-of-file record" in out
