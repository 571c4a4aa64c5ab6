"""``rocketstore audit``: every check and the recovery report per store — health per area, the findings that
matter first, what a restart would lose — as text, JSON or one HTML file (CLI, in-process, read-only; the
audit is ``report.audit``'s, the page ``report.html``'s)."""
from __future__ import annotations

import os
import sys

import click

from rocketstore_spark.cli.options import (PROBLEMS, given_settings, json_option, layouts, settings_options,
                                           work_dir_option)
from rocketstore_spark.cli.output import SEVERITY_ORDER, SEVERITY_STYLE, emit_json, line, table
from rocketstore_spark.store.outputs import outside_stores, store_roots

FIRST_FINDINGS = 15


@click.command("audit")
@click.argument("stores", nargs=-1, required=True)
@settings_options
@click.option("--output", "json_file", type=click.Path(dir_okay=False), help="also write the JSON document here")
@click.option("--html", "html_file", type=click.Path(dir_okay=False),
              help="also write the report as one self-contained HTML file (charts included, loads nothing), one "
                   "section per store")
@work_dir_option
@json_option
def audit_cmd(stores, broker_conf, rocketmq_version, json_file, html_file, work_dir, as_json):
    """Every check and the recovery report, per store: health per area, the findings that matter first, and
    what a restart would lose. Exit 3 when problems are found or data is at risk.

    \b
    Examples:
      rocketstore audit tests/golden/rocketmq-4.9.8/corrupt-body/store
      rocketstore audit tests/golden/rocketmq-5.5.1/corrupt-body/store \\
          tests/golden/rocketmq-5.5.1/consumer-offsets/store --html /tmp/audit.html
    """
    from rocketstore_spark.report.audit import audit_stores
    from rocketstore_spark.report.documents import save_document
    found = layouts(stores)
    if json_file:
        outside_stores(json_file, store_roots(found), "JSON document")
    if work_dir:
        outside_stores(work_dir, store_roots(found), "work directory")
    if html_file:
        outside_stores(html_file, store_roots(found), "HTML report")
        if not os.path.isdir(os.path.dirname(os.path.abspath(html_file))):
            raise click.UsageError(f"--html {html_file}: its directory does not exist")
    audit = audit_stores(found, options=given_settings(rocketmq_version), broker_conf=broker_conf,
                         work_dir=work_dir, pages=bool(html_file))
    if html_file:
        from rocketstore_spark.report.html import write_html
        write_html(html_file, audit.pages)
    if json_file:
        save_document(audit.document(), json_file)
    if as_json:
        emit_json(audit.document())
    else:
        for d in audit.docs:
            _print_audit(d)
        if json_file:
            line(f"JSON written to {json_file}")
        if html_file:
            line(f"HTML report written to {html_file}")
    sys.exit(PROBLEMS if audit.at_risk else 0)


def _print_audit(d: dict) -> None:
    from rocketstore_spark.recovery.report import harmful
    from rocketstore_spark.report.recovery_text import recovery_in_words, render_recovery
    line(f"Audit of {d['store']} (RocketMQ {d['rocketmq_release']}): "
         + ("PROBLEMS FOUND" if d["at_risk"] else "healthy"), "bold red" if d["at_risk"] else "bold green")
    if d["recovery"]:
        headline, sentences = recovery_in_words(d["recovery"])
        line(headline, "bold red" if harmful(d["recovery"]) else "green")
        for sentence in sentences:
            line(f"  {sentence}")
    table("Health per area", ["area", "errors", "warnings", "info"],
          [(a, c["error"], c["warning"], c["info"]) for a, c in sorted(d["areas"].items())],
          numeric={"errors", "warnings", "info"})
    first = sorted(d["findings"], key=lambda f: SEVERITY_ORDER[f["severity"]])[:FIRST_FINDINGS]
    table("Findings that matter first", ["severity", "check", "file", "byte", "message"],
          [(f["severity"], f["check"], f["file"], f["file_position"], f["message"]) for f in first],
          numeric={"byte"}, styles=[SEVERITY_STYLE[f["severity"]] for f in first])
    if d["recovery"]:
        line()
        click.echo(render_recovery(d["recovery"]))
    line()
