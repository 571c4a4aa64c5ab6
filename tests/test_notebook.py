"""The notebook's code cells run top to bottom against the bundled sample store (real Spark)."""
import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "explore_store.ipynb"


@pytest.mark.spark
def test_notebook_cells_run(spark, monkeypatch, capsys):
    monkeypatch.chdir(NOTEBOOK.parent)
    cells = [c for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    namespace = {}
    for cell in cells:
        exec(compile("".join(cell["source"]), str(NOTEBOOK), "exec"), namespace)
    out = capsys.readouterr().out
    assert "TopicTest" in out and "BLANK end-of-file record" in out
