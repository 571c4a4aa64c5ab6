"""``rocketstore rebuild``: ConsumeQueues and IndexFiles rebuilt from the CommitLog into a directory outside
the store and compared with the store's own (CLI, in-process; the rebuild is ``rebuild.output``'s, its JSON
document ``report.documents``')."""
from __future__ import annotations

import sys

import click

from rocketstore_spark.cli.options import PROBLEMS, findings_limit_option, given_settings, json_option, settings_options
from rocketstore_spark.cli.output import emit_json, findings_table, line, table
from rocketstore_spark.findings import about_the_store


@click.command("rebuild")
@click.argument("store")
@click.option("--output", required=True, type=click.Path(file_okay=False),
              help="directory for consumequeue/ and index/ (outside the store)")
@settings_options
@click.option("--force", is_flag=True, help="rebuild even where settings contradict the store's files")
@click.option("--resync", is_flag=True,
              help="every valid record, reading on past damage, instead of what the release's own rebuild writes; "
                   "lists the entries RocketMQ would not have")
@findings_limit_option
@json_option
def rebuild_cmd(store, output, broker_conf, rocketmq_version, force, resync, limit, as_json):
    """Rebuild ConsumeQueues and IndexFiles from the CommitLog into a directory outside the store, byte for byte
    what RocketMQ writes when it restarts without them, and compare them with the store's own. Exit 3 when
    they differ or reading the CommitLog met damage (listed with file and byte).

    \b
    Example:
      rocketstore rebuild tests/golden/rocketmq-5.5.1/cq-lag-clean/store --output /tmp/rebuilt
    """
    from rocketstore_spark.rebuild.output import rebuild_store, summary_lines
    r = rebuild_store(store, output, options=given_settings(rocketmq_version), broker_conf=broker_conf,
                      allow_conflicts=force, resync=resync)
    changed = [d for d in r.differences if d.status != "identical"]
    if as_json:
        emit_json(r.document())
    else:
        batch = f"{len(r.batch_queues)} BatchConsumeQueue(s), " if r.batch_queues else ""
        line(f"Rebuilt {r.store} into {r.output}: {len(r.queues)} queue(s), {batch}{len(r.index_files)} IndexFile(s), "
             f"RocketMQ {r.settings.release_label} ({r.settings.sources.get('rocketmqVersion')})")
        for text in summary_lines(r.resync, r.settings.release_label, r.restart, r.beyond, r.store_type):
            line(text)
        line(f"Against the store: {len(r.differences) - len(changed)} file(s) identical, {len(changed)} differ")
        if changed:
            table(None, ["kind", "store file", "rebuilt file", "status", "detail"],
                  [(d.kind, d.store_file, d.rebuilt_file, d.status, d.detail) for d in changed])
        if r.findings:
            findings_table(r.findings, limit, f"What reading the CommitLog met ({len(r.findings)} finding(s))")
    sys.exit(PROBLEMS if changed or about_the_store(r.findings) else 0)
