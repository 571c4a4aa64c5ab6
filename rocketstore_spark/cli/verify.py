"""``rocketstore verify``: every check of docs/checks.md on each store (CLI, in-process, read-only; the checks
are ``verify.store``'s, the JSON document ``report.documents``')."""
from __future__ import annotations

import sys

import click

from rocketstore_spark.cli.options import (PROBLEMS, findings_limit_option, given_settings, json_option, layouts,
                                           settings_options, work_dir_option)
from rocketstore_spark.cli.output import SEVERITY_ORDER, SEVERITY_STYLE, emit_json, findings_table, line, table
from rocketstore_spark.store.outputs import outside_stores, store_roots



@click.command("verify")
@click.argument("stores", nargs=-1, required=True)
@settings_options
@click.option("--no-crc", is_flag=True, help="skip the BODYCRC check")
@findings_limit_option
@work_dir_option
@json_option
def verify_cmd(stores, broker_conf, rocketmq_version, no_crc, limit, work_dir, as_json):
    """Every check of docs/checks.md: BODYCRC past the first failure, CommitLog <-> ConsumeQueue <-> IndexFile,
    checkpoint, consumer offsets. Exit 3 when anything above info level is found.

    \b
    Example:
      rocketstore verify tests/golden/rocketmq-4.9.8/corrupt-body/store
    """
    from rocketstore_spark.findings import any_problem
    from rocketstore_spark.report.documents import verify_document
    from rocketstore_spark.verify.store import verify_store
    found = layouts(stores)
    if work_dir:
        outside_stores(work_dir, store_roots(found), "work directory")
    verdicts = [verify_store(layout.name, options=given_settings(rocketmq_version), broker_conf=broker_conf,
                             check_crc=not no_crc, work_dir=work_dir) for layout in found]
    if as_json:
        emit_json(verify_document(verdicts))
    else:
        for v in verdicts:
            _print_verdict(v, limit)
    sys.exit(PROBLEMS if any(any_problem(v.findings) for v in verdicts) else 0)


def _print_verdict(v, limit: int) -> None:
    counts: dict = {}
    for f in v.findings:
        counts[(f.check, str(f.severity))] = counts.get((f.check, str(f.severity)), 0) + 1
    worst = min((str(f.severity) for f in v.findings), key=SEVERITY_ORDER.get, default="clean")
    line(f"Store {v.store}: {worst}", "bold")
    line(f"  RocketMQ {v.settings.release_label}; {len(v.queues)} queue(s), {len(v.index)} IndexFile(s); CommitLog "
         f"{v.log.min_offset:,} .. {v.log.end:,}")
    if counts:
        by_severity = sorted(counts.items(), key=lambda kv: (SEVERITY_ORDER[kv[0][1]], kv[0][0]))
        table(None, ["check", "severity", "findings"], [(c, s, n) for (c, s), n in by_severity],
              numeric={"findings"}, styles=[SEVERITY_STYLE[s] for (c, s), n in by_severity])
        findings_table(v.findings, limit)
    line()
