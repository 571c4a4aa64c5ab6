"""The catalogue of checks is the contract for findings: every entry well formed and used, every id the code
emits catalogued, docs/checks.md generated from it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocketstore_spark.checks import CATALOGUE, CHECKS, Severity, render_markdown
from rocketstore_spark.codec.commitlog import Stop
from rocketstore_spark.findings import finding

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rocketstore_spark"
EMITTED = re.compile(r"""(?:finding|_report)\(\s*["']([a-z_]+\.[a-z_]+)["']""")


def emitted_ids() -> set[str]:
    ids = set()
    for path in PACKAGE.rglob("*.py"):
        ids |= set(EMITTED.findall(path.read_text()))
    # damage stops of the walk are reported under Stop.check
    return ids | {s.check for s in Stop if s.is_damage}


@pytest.mark.parametrize("check", CATALOGUE, ids=lambda c: c.id)
def test_entry_is_well_formed(check):
    assert re.fullmatch(r"[a-z]+\.[a-z_]+", check.id)
    assert isinstance(check.severity, Severity)
    assert check.rule and check.rocketmq and check.action and check.area
    assert "store-format.md" not in check.rocketmq + check.rule      # cite docs/format/, inside the repo
    for ref in re.findall(r"docs/format/[a-z_]+\.md", check.rocketmq):
        assert (ROOT / ref).is_file(), ref


def test_every_emitted_id_is_catalogued_and_every_entry_is_emitted():
    emitted = emitted_ids()
    assert emitted - set(CHECKS) == set()
    assert set(CHECKS) - emitted == set()


def test_docs_checks_md_is_generated_from_the_catalogue():
    assert (ROOT / "docs" / "checks.md").read_text() == render_markdown(), \
        "regenerate: python -m rocketstore_spark.checks > docs/checks.md"


def test_finding_takes_its_severity_from_the_catalogue_and_refuses_unknown_ids():
    f = finding("commitlog.resynchronised", "/s/commitlog/0", 12, "m", skipped_from=3)
    assert f.severity == Severity.WARNING == "warning" and f.as_row()["severity"] == "warning"
    with pytest.raises(ValueError, match="not in checks.CATALOGUE"):
        finding("commitlog.nonsense", "/f", None, "m")
