"""``rocketstore export``: a slice of the messages of stores — a topic, a queue, a key, a time window, an
offset range — written to Parquet or JSON lines (CLI, in-process; the stores are only read; the slice and
its writing are ``lookup.export``'s)."""
from __future__ import annotations

import sys

import click

from rocketstore_spark.cli.options import PROBLEMS, commitlog_path_option, findings_limit_option, json_option, layouts
from rocketstore_spark.cli.output import emit_json, findings_table, line
from rocketstore_spark.findings import any_problem
from rocketstore_spark.store.outputs import outside_stores, store_roots


@click.command("export")
@click.argument("stores", nargs=-1, required=True)
@click.option("--output", required=True, type=click.Path(dir_okay=False),
              help="the file to write (outside every store): .parquet, or .jsonl / .json for JSON lines")
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl"]), help="default: from --output's suffix")
@click.option("--topic", help="only this topic")
@click.option("--queue", "queue_id", type=int, help="only this queue id")
@click.option("--key", help="only records carrying this KEYS value")
@click.option("--uniq-key", help="only the record(s) with this UNIQ_KEY")
@click.option("--tag", help="only records with this TAGS value")
@click.option("--since", help="ISO 8601 store time (UTC if no zone)")
@click.option("--until", help="ISO 8601 store time (UTC if no zone)")
@click.option("--from-offset", type=int, default=0, help="physical offsets from here (whole segments skipped)")
@click.option("--to-offset", type=int, help="physical offsets below this")
@click.option("--crc-ok-only", is_flag=True, help="leave out records whose body fails its CRC")
@findings_limit_option
@commitlog_path_option
@json_option
def export_cmd(stores, output, fmt, topic, queue_id, key, uniq_key, tag, since, until, from_offset, to_offset,
               crc_ok_only, limit, as_json):
    """Write a slice of the messages — a topic, a queue, a key, a time window, an offset range — to Parquet or
    JSON lines, with everything needed to publish them again (topic, queue, flag, keys, tags, properties, body;
    JSON bodies in base64). The store is only read. What the reading met (damage, bodies failing BODYCRC) is
    listed with file and byte ("findings" in --json); the records around damage are still exported. Exit 3
    when nothing matched or the reading met damage.

    With --topic, each store is read through the topic's ConsumeQueues where they account for every record
    (the same rows as a scan, a fraction of the work); stderr (--json: "read") says per store whether it
    was "read through the ConsumeQueue" or "scanned: <why>".

    \b
    Examples:
      rocketstore export tests/golden/rocketmq-5.5.1/clean/store --topic TopicTest --output /tmp/topictest.parquet
      rocketstore export tests/golden/rocketmq-5.5.1/clean/store --topic OrderTopic --key order-5 --output /tmp/o.jsonl
    """
    import time

    from rocketstore_spark.lookup.export import Slice, export, format_of
    from rocketstore_spark.lookup.query import parse_time
    found = layouts(stores)
    target = outside_stores(output, store_roots(found), "export file")
    fmt = fmt or format_of(target)
    if target.exists():
        raise click.UsageError(f"{target} already exists: give a new file")
    if not target.parent.is_dir():
        raise click.UsageError(f"{target.parent}: no such directory")
    where = Slice(topic=topic, queue_id=queue_id, key=key, uniq_key=uniq_key, tag=tag, since_ms=parse_time(since),
                  until_ms=parse_time(until), from_offset=from_offset, to_offset=to_offset, crc_ok_only=crc_ok_only)
    started = time.monotonic()
    plans: list = []
    findings: list = []
    n = export(found, target, where, fmt, plans=plans, findings=findings)
    doc = {"output": str(target), "format": fmt, "messages": n, "stores": [layout.name for layout in found],
           "read": [{"store": how.store, "through_consumequeue": how.through_queues, "how": how.describe()}
                    for how in plans],
           "findings": [f.as_row() for f in findings], "seconds": round(time.monotonic() - started, 3)}
    if as_json:
        emit_json(doc)
    else:
        for how in plans:           # how each store was read: through the ConsumeQueue, or scanned and why
            click.echo(f"{how.store}: {how.describe()}", err=True)
        line(f"{n} message(s) written to {target} ({fmt}) in {doc['seconds']} s")
        if findings:
            findings_table(findings, limit, f"What the reading met ({len(findings)} finding(s))")
    sys.exit(PROBLEMS if not n or any_problem(findings) else 0)
