"""The catalogue of checks is the contract for findings: every entry well formed and used, every id the code
emits catalogued, docs/checks.md generated from it."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rocketstore_spark.checks import CATALOGUE, CHECKS, Severity, render_markdown
from rocketstore_spark.codec.commitlog import Stop
from rocketstore_spark.findings import finding

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rocketstore_spark"
CHECK_ID = re.compile(r"[a-z]+\.[a-z_]+")


def _docstrings(tree) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def emitted_ids() -> set[str]:
    """Every string constant of the package's code (not docstrings, not the catalogue) shaped like a check id:
    findings are made with ``finding(id, ...)`` or small helpers that pass the id on."""
    ids = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "checks.py":
            continue
        tree = ast.parse(path.read_text())
        skip = _docstrings(tree)
        ids |= {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and id(node) not in skip
                and isinstance(node.value, str) and CHECK_ID.fullmatch(node.value) and node.value in CHECKS}
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


def test_every_entry_is_emitted():
    assert set(CHECKS) - emitted_ids() == set()


def test_docs_checks_md_is_generated_from_the_catalogue():
    assert (ROOT / "docs" / "checks.md").read_text() == render_markdown(), \
        "regenerate: python -m rocketstore_spark.checks > docs/checks.md"


def test_finding_takes_its_severity_from_the_catalogue_and_refuses_unknown_ids():
    f = finding("commitlog.resynchronised", "/s/commitlog/0", 12, "m", skipped_from=3)
    assert f.severity == Severity.WARNING == "warning" and f.as_row()["severity"] == "warning"
    with pytest.raises(ValueError, match="not in checks.CATALOGUE"):
        finding("commitlog.nonsense", "/f", None, "m")
