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
@click.option("--scrub", "scrub_state", type=click.Path(dir_okay=False),
              help="incremental: scan again only new, grown and changed CommitLog segments plus a rotating share "
                   "of the rest, carry the cross-checks over when no store file changed, else resume them on "
                   "what was written since; this file keeps the state (created on the first run, never inside "
                   "a store)")
@click.option("--rotation", type=click.IntRange(min=1),
              help="with --scrub: runs per full rotation of the unchanged segments [default: 28, four weeks of "
                   "nightly runs]")
@click.option("--history", "history_dir", type=click.Path(file_okay=False),
              help="append the findings and a summary row per store, with a run id, to the Delta tables "
                   "DIR/findings and DIR/audit_runs (starts a local Spark session)")
@work_dir_option
@json_option
def audit_cmd(stores, broker_conf, rocketmq_version, json_file, html_file, scrub_state, rotation, history_dir,
              work_dir, as_json):
    """Every check and the recovery report, per store: health per area, the findings that matter first, and
    what a restart would lose. Exit 3 when problems are found or data is at risk.

    \b
    Examples:
      rocketstore audit tests/golden/rocketmq-4.9.8/corrupt-body/store
      rocketstore audit tests/golden/rocketmq-5.5.1/corrupt-body/store \\
          tests/golden/rocketmq-5.5.1/consumer-offsets/store --html /tmp/audit.html
      rocketstore audit tests/golden/rocketmq-5.5.1/clean/store --scrub /tmp/scrub.json --history /tmp/history
    """
    import datetime as dt
    import time
    import uuid

    from rocketstore_spark.report.audit import audit_stores
    from rocketstore_spark.report.documents import save_document
    found = layouts(stores)
    run_id, run_time, clock = uuid.uuid4().hex, dt.datetime.now(dt.timezone.utc), time.perf_counter()
    for path, what in ((scrub_state, "scrub state"), (history_dir, "history")):
        if path:
            outside_stores(path, store_roots(found), what)
    if scrub_state and html_file:
        raise click.UsageError("--html needs the full audit (the page draws every segment and queue): "
                               "run it without --scrub")
    if json_file:
        outside_stores(json_file, store_roots(found), "JSON document")
    if work_dir:
        outside_stores(work_dir, store_roots(found), "work directory")
    if html_file:
        outside_stores(html_file, store_roots(found), "HTML report")
        if not os.path.isdir(os.path.dirname(os.path.abspath(html_file))):
            raise click.UsageError(f"--html {html_file}: its directory does not exist")
    if scrub_state:
        from rocketstore_spark.report.scrub import scrub_stores
        from rocketstore_spark.verify.scrub import ROTATION
        audit = scrub_stores(found, scrub_state, rotation=rotation or ROTATION,
                             options=given_settings(rocketmq_version), broker_conf=broker_conf,
                             work_dir=work_dir).audit
    else:
        audit = audit_stores(found, options=given_settings(rocketmq_version), broker_conf=broker_conf,
                             work_dir=work_dir, pages=bool(html_file))
    seconds = round(time.perf_counter() - clock, 3)
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
            if "scrub" in d:
                from rocketstore_spark.report.scrub import scrub_lines
                for text in scrub_lines(d)[1:]:
                    line(text.strip())
                line()
        if json_file:
            line(f"JSON written to {json_file}")
        if html_file:
            line(f"HTML report written to {html_file}")
    if history_dir:
        from rocketstore_spark.spark.history import append_history_here
        append_history_here(os.path.abspath(history_dir), run_id, run_time, audit.docs, found, seconds)
        click.echo(f"findings and a summary row per store appended to {history_dir}/findings and "
                   f"{history_dir}/audit_runs (run {run_id})", err=as_json)
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
