"""Every spark-submit job checks its stores and outputs on the driver before Spark starts, with the same words:
an output inside a store and a missing broker.conf are one line and exit 2 (the jobs' ``check`` runs here in
process, as ``spark.entrypoint.run`` runs it before any SparkSession)."""
from __future__ import annotations

import importlib

import pytest

from tests.golden.goldens import BY_ID

STORE = BY_ID["5.5.1/clean"].store


@pytest.mark.parametrize("job,output", [("verify", "--json"), ("scrub", "--state"), ("ingest", "--table"),
                                        ("recovery_report", "--json")])
def test_an_output_inside_the_store_is_refused(job, output, capsys):
    argv = ["--store", str(STORE), output, str(STORE / "config" / "out")]
    if job == "scrub":
        argv += ["--json", "-"]
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(f"jobs.{job}").check(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{job}: ") and "\n" not in err and str(STORE) in err
    assert not (STORE / "config" / "out").exists()


@pytest.mark.parametrize("job,extra", [("verify", []), ("scrub", ["--state", "{tmp}/state.json"])])
def test_a_missing_broker_conf_is_refused(job, extra, tmp_path, capsys):
    argv = ["--store", str(STORE), "--broker-conf", str(tmp_path / "broker.conf"),
            *(a.format(tmp=tmp_path) for a in extra)]
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(f"jobs.{job}").check(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == f"{job}: --broker-conf {tmp_path / 'broker.conf'}: no such file"


def test_ingest_restart_at_must_name_one_of_the_stores(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module("jobs.ingest").check(["--store", str(STORE), "--table", str(tmp_path / "t"),
                                                      "--restart-at", f"{tmp_path}=0"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == (f"ingest: --restart-at names {tmp_path}, which is not among the "
                                               "--store paths")
