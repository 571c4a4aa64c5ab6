"""The repair's documents (issue #25): the plan, journal and receipt are typed and versioned, a document of
another type or version is refused by name (exit 2 at the CLI), and the plan carries the settings it was
checked with, so a broker.conf edited between plan and apply is never followed silently."""
from __future__ import annotations

import json

import pytest

from rocketstore_spark.documents import DocumentError
from rocketstore_spark.recovery.apply import ApplyRefused, apply_plan
from rocketstore_spark.recovery.documents import Journal, Plan, Receipt, plan_path
from rocketstore_spark.recovery.plan import make_plan
from tests.cli.helpers import run
from tests.golden.goldens import BY_ID

GOLDEN = BY_ID["4.9.8/crash"]


def test_plan_journal_and_receipt_are_typed_documents_carrying_their_settings(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=golden\nmessageIndexEnable=true\n")
    plan = make_plan(str(GOLDEN.store), tmp_path / "plan", broker_conf=str(conf))
    on_disk = json.loads(plan_path(tmp_path / "plan").read_text())
    assert on_disk == plan and Plan.load(plan_path(tmp_path / "plan")).to_json() == plan
    assert (plan["document_type"], plan["document_version"], plan["plan_version"]) == \
        ("rocketstore-spark/repair-plan", 4, 4)
    resolved = plan["settings"]["resolved"]
    assert (resolved["release"], resolved["release_family"]) == ("4.9.8", "4.9.x")
    assert resolved["values"]["messageIndexEnable"] is True
    assert resolved["sources"]["messageIndexEnable"] == f"broker.conf ({conf})"
    assert resolved["broker_conf"]["path"] == str(conf) and len(resolved["broker_conf"]["sha256"]) == 64
    receipt = apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    assert receipt["document_type"] == Receipt.DOCUMENT_TYPE and receipt["settings"] == resolved
    journal = Journal.load(tmp_path / "plan" / "apply.json")
    assert journal.phase == "applied" and journal.settings == resolved


def test_a_document_of_another_version_or_type_is_refused_by_name(tmp_path):
    make_plan(str(GOLDEN.store), tmp_path / "plan")
    path = plan_path(tmp_path / "plan")
    plan = json.loads(path.read_text())
    path.write_text(json.dumps(plan | {"document_version": 2}))
    with pytest.raises(ApplyRefused, match=rf"{path}: rocketstore-spark/repair-plan version 2 .* reads version 4"):
        apply_plan(tmp_path / "plan", output=tmp_path / "a")
    result = run("recover", "apply", tmp_path / "plan", "--output", tmp_path / "a")
    assert result.exit_code == 2 and "version 2" in result.output and "version 4" in result.output
    assert not (tmp_path / "a").exists()

    path.write_text(json.dumps(plan | {"document_type": Journal.DOCUMENT_TYPE}))
    with pytest.raises(ApplyRefused, match="type 'rocketstore-spark/repair-journal', expected "
                                           "'rocketstore-spark/repair-plan'"):
        apply_plan(tmp_path / "plan", output=tmp_path / "a")
    path.write_text("{not json")
    with pytest.raises(DocumentError, match="not a JSON document"):
        Plan.load(path)
    # a version 2 plan (before documents had a type) names what it is not
    path.write_text(json.dumps({k: v for k, v in plan.items() if not k.startswith("document_")} | {"plan_version": 2}))
    with pytest.raises(ApplyRefused, match="a document of type None"):
        apply_plan(tmp_path / "plan", output=tmp_path / "a")


def test_a_broker_conf_edited_between_plan_and_apply_is_not_followed(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("messageIndexEnable=true\n")
    plan = make_plan(str(GOLDEN.store), tmp_path / "plan", broker_conf=str(conf))
    conf.write_text("messageIndexEnable=false\n")            # following this, the repair would build no IndexFile
    with pytest.raises(ApplyRefused, match=rf"{conf}: the broker.conf the plan was made from changed since"):
        apply_plan(tmp_path / "plan", output=tmp_path / "a")
    result = run("recover", "apply", tmp_path / "plan", "--output", tmp_path / "a")
    assert result.exit_code == 2 and "changed since" in result.output
    assert not (tmp_path / "a").exists()
    conf.unlink()
    with pytest.raises(ApplyRefused, match="is gone"):
        apply_plan(tmp_path / "plan", output=tmp_path / "a")

    # asked to (`--follow-plan-settings`), the apply builds with the plan's own settings: IndexFiles, as the
    # plan was checked with
    result = run("recover", "apply", tmp_path / "plan", "--output", tmp_path / "a", "--follow-plan-settings", "--json")
    assert result.exit_code == 0, result.output
    receipt = json.loads(result.stdout)
    assert receipt["settings"] == plan["settings"]["resolved"]
    assert receipt["staged"]["index_files"] > 0 and any((tmp_path / "a" / "index").iterdir())
