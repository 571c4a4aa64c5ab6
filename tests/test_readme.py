"""Every Python example of the README runs as written from the repository root, against the bundled sample
stores, and shows what it claims."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.golden.goldens import BY_ID

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[1]


def readme_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


def test_readme_examples_run_and_compute_what_they_say(spark, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    for block in readme_blocks():
        exec(compile(block, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    g = BY_ID["5.5.1/consumer-offsets"]
    assert namespace["msgs"].count() == len(g.messages)
    # lag = RocketMQ's own max offset of the queue (the manifest) - the committed offset
    max_offset = {(q["topic"], q["queue_id"]): q["max_offset"] for q in g.manifest["queues"]}
    rows = namespace["lag"].collect()
    assert rows
    for r in rows:
        want = max_offset.get((r.topic, r.queue_id))
        assert r.max_offset == want and r.lag == (None if want is None else want - r.consumer_offset)
    assert "tests/golden/rocketmq-4.9.8/clean/store" in out and "tests/golden/rocketmq-5.5.1/clean/store" in out
    assert "commitlog.body_crc" in out
    corrupt = BY_ID["4.9.8/corrupt-body"]
    for s in corrupt.manifest["surgery"]:
        record = next(m for m in corrupt.messages
                      if m["physical_offset"] <= s["physical_offset"] < m["physical_offset"] + m["total_size"])
        assert f"[error] commitlog.body_crc: {s['file']} @ byte {record['file_position']}: " in out
    assert {d.status for d in namespace["result"].differences} == {"identical"}
    assert f"5.4.0 {len(namespace['result'].differences)} files identical" in out


def test_make_run_audits_the_damaged_sample_and_says_what_the_readme_says(tmp_path):
    """`make run` is scripts/run.sh after the setup: the audit of the crashed 5.5.1 store, the verdict the
    README quotes (RocketMQ's own recovery of a copy: everything after its max offset is lost), the HTML
    page written; exit 0 for the audit's expected 3, and a usage error still fails."""
    import subprocess
    assert "\t@bash scripts/run.sh\n" in (ROOT / "Makefile").read_text().split("\nrun:")[1].split("\n\n")[0] + "\n"
    g = BY_ID["5.5.1/corrupt-body"]
    assert f"make run` audits `{g.store.relative_to(ROOT)}`" in (ROOT / "README.md").read_text()
    html = tmp_path / "audit.html"
    proc = subprocess.run(["bash", "scripts/run.sh", str(g.store.relative_to(ROOT)), str(html)], cwd=ROOT,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert "exit status 3" in proc.stderr and html.stat().st_size > 0
    end = g.manifest["recovery"]["commitlog_max_offset"]
    lost = [m for m in g.messages if m["physical_offset"] > end and m["body_crc_ok"]]
    verdict = f"A restart now would lose {len(lost)} valid messages in {len({m['topic'] for m in lost})} topics"
    lines = [x.strip() for x in proc.stdout.splitlines()]
    assert lines.index(verdict + ".") < lines.index("Health per area")        # the verdict comes first
    assert f"*{verdict}*" in " ".join((ROOT / "README.md").read_text().split())
    bad = subprocess.run(["bash", "scripts/run.sh", str(tmp_path / "missing"), str(html)], cwd=ROOT,
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
