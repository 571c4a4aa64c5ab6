"""``rocketstore dump FILE``: the records of one CommitLog segment, the entries of one ConsumeQueue file, or
the header and entries of one IndexFile — like Kafka's dump-log tool (CLI, in-process, read-only; the rows
are ``lookup.dump``'s).

The kind of file is told by where it lies (``commitlog/NAME``, ``consumequeue/TOPIC/QUEUE/NAME``,
``index/NAME``), or given with ``--kind``. ``--from``: the physical offset (segments), queue offset
(ConsumeQueue) or entry number (IndexFile) to start at; ``--count``: how many.
"""
from __future__ import annotations

import json

import click
import numpy as np

from rocketstore_spark.cli.output import line, table


@click.command("dump")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--kind", type=click.Choice(["commitlog", "consumequeue", "index"]), help="default: from the path")
@click.option("--from", "start", type=int, default=None, help="physical offset / queue offset / entry to start at")
@click.option("--count", type=int, default=20, show_default=True, help="how many records or entries (0: all)")
@click.option("--body", type=click.Choice(["none", "text", "hex"]), default="none", show_default=True,
              help="CommitLog bodies: off by default")
@click.option("--json", "as_json", is_flag=True, help="JSON lines on stdout, one per record or entry")
def dump_cmd(file, kind, start, count, body, as_json):
    """The records of one CommitLog segment, ConsumeQueue file or IndexFile.

    \b
    Examples:
      rocketstore dump tests/golden/rocketmq-5.5.1/clean/store/commitlog/00000000000000000000 --count 5
      rocketstore dump tests/golden/rocketmq-5.5.1/clean/store/consumequeue/TopicTest/0/00000000000000000000
    """
    from rocketstore_spark.lookup.dump import dump_file
    dump = dump_file(file, kind, start, count, body)
    for note in dump.notes:
        click.echo(note, err=True)
    rows = dump.rows
    if as_json:
        for r in rows:
            click.echo(json.dumps(r, ensure_ascii=False, default=str))
        return
    if not rows:
        line("nothing at that position")
        return
    headers = list(rows[0])
    table(f"{dump.kind} {file}", headers, [tuple(r.values()) for r in rows],
          numeric={h for h in headers if isinstance(rows[0][h], (int, np.integer)) and not isinstance(rows[0][h], bool)})
