"""``rocketstore query``: messages found across stores by key, UNIQ_KEY, message id, physical offset, queue
position, or topic and time (CLI, in-process, read-only; the lookups are ``lookup.query``'s)."""
from __future__ import annotations

import json
import sys

import click

from rocketstore_spark.cli.options import PROBLEMS
from rocketstore_spark.cli.output import table


@click.command("query")
@click.argument("stores", nargs=-1, required=True)
@click.option("--topic", help="the topic (needed with --key, --uniq-key and --queue)")
@click.option("--key", help="a KEYS value (through the IndexFiles, like mqadmin queryMsgByKey, without its limit)")
@click.option("--uniq-key", help="a UNIQ_KEY (the client's message id), through the IndexFiles")
@click.option("--msg-id", help="a broker message id (store host + physical offset)")
@click.option("--offset", "physical_offset", type=int, help="a physical offset")
@click.option("--queue", "queue_id", type=int, help="with --topic and --queue-offset: through the ConsumeQueue")
@click.option("--queue-offset", type=int, help="with --topic and --queue")
@click.option("--count", type=int, default=1, show_default=True, help="with --queue-offset: how many")
@click.option("--since", help="ISO 8601 store time (UTC if no zone): with --key/--uniq-key/--topic")
@click.option("--until", help="ISO 8601 store time (UTC if no zone): with --key/--uniq-key/--topic")
@click.option("--limit", type=int, default=1000, show_default=True, help="--topic alone: at most this many")
@click.option("--body", type=click.Choice(["none", "text", "hex", "base64"]), default="none", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="JSON lines on stdout, one per message")
def query_cmd(stores, topic, key, uniq_key, msg_id, physical_offset, queue_id, queue_offset, count, since, until,
              limit, body, as_json):
    """Find messages across stores by key, UNIQ_KEY, message id, physical offset, queue position, or topic and
    time. Exit 0 when found, 3 when nothing matches.

    \b
    Examples:
      rocketstore query tests/golden/rocketmq-5.5.1/clean/store --topic TopicTest --key order-1
      rocketstore query tests/golden/rocketmq-5.5.1/clean/store --topic TopicTest --queue 0 --queue-offset 5 --count 3
    """
    from rocketstore_spark.lookup.query import TimeRange, find_in_stores, parse_time
    ways = [x is not None for x in (key, uniq_key, msg_id, physical_offset, queue_offset)]
    if sum(ways) > 1:
        raise click.UsageError("give one of --key, --uniq-key, --msg-id, --offset, --queue-offset")
    if (key or uniq_key or queue_offset is not None) and not topic:
        raise click.UsageError("--key, --uniq-key and --queue-offset need --topic")
    if queue_offset is not None and queue_id is None:
        raise click.UsageError("--queue-offset needs --queue")
    if not any(ways) and not topic:
        raise click.UsageError("say what to find: --key, --uniq-key, --msg-id, --offset, --queue-offset or --topic")
    found = find_in_stores(stores, body=body, topic=topic, key=key, uniq_key=uniq_key, msg_id=msg_id,
                           physical_offset=physical_offset, queue_id=queue_id, queue_offset=queue_offset,
                           count=count, window=TimeRange(parse_time(since), parse_time(until)), limit=limit)
    want_body = body != "none"
    if as_json:
        for h in found:
            click.echo(json.dumps(h, ensure_ascii=False, default=str))
    else:
        table(f"{len(found)} message(s)", ["store", "physical offset", "topic", "queue", "queue offset", "store time",
                                           "tags", "keys", "uniq key", "msg id"] + (["body"] if want_body else []),
              [(h["store"], h["physical_offset"], h["topic"], h["queue_id"], h["queue_offset"], h["store_timestamp"],
                h["tags"], " ".join(h["keys"] or []), h["uniq_key"], h["msg_id"])
               + ((h["body"],) if want_body else ()) for h in found],
              numeric={"physical offset", "queue", "queue offset"})
    sys.exit(0 if found else PROBLEMS)
