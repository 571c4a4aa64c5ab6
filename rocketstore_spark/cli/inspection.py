"""``rocketstore inspect``: what is in a store — segments, topics and queues, IndexFiles, checkpoint and
shutdown state, release (CLI, in-process, read-only; the document is ``report.inspect``'s)."""
from __future__ import annotations

import click

from rocketstore_spark.cli.options import commitlog_path_option, json_option, layouts
from rocketstore_spark.cli.output import emit_json, line, table
from rocketstore_spark.report.text import utc_time


@click.command("inspect")
@click.argument("stores", nargs=-1, required=True)
@commitlog_path_option
@json_option
def inspect_cmd(stores, as_json):
    """What is in a store: segments, topics and queues, IndexFiles, checkpoint and shutdown state, release.

    \b
    Example:
      rocketstore inspect tests/golden/rocketmq-5.5.1/clean/store
    """
    from rocketstore_spark.report.inspect import inspect_store
    docs = [inspect_store(layout) for layout in layouts(stores)]        # --commitlog-path: a multi-path log
    if as_json:
        emit_json({"stores": docs})
        return
    for d in docs:
        _print_inspect(d)


def _print_inspect(d: dict) -> None:
    records = sum(s["records"] for s in d["segments"])
    line(f"Store {d['store']}", "bold")
    line(f"  RocketMQ {d['rocketmq_release']} ({d['release_source']})")
    state = "abort file present: the broker is running or crashed" if d["abort_present"] else "clean shutdown"
    line(f"  {len(d['segments'])} segment(s), {records:,} records; {state}")
    if d["checkpoint"]:
        cp = d["checkpoint"]
        line(f"  checkpoint: physicMsgTimestamp {utc_time(cp['physic_msg_timestamp'])}, logicsMsgTimestamp "
             f"{utc_time(cp['logics_msg_timestamp'])}, indexMsgTimestamp {utc_time(cp['index_msg_timestamp'])}")
    for f in d["layout_findings"]:
        line(f"  {f}", "yellow")
    table("CommitLog segments", ["segment", "records", "first store time", "last store time", "valid end", "stops at",
                                 "findings"],
          [(s["file"], s["records"], s["first_store_time"], s["last_store_time"], s["valid_end"], s["stop"],
            s["findings"]) for s in d["segments"]], numeric={"records", "valid end", "findings"})
    topics: dict[str, list] = {}
    for q in d["queues"]:
        topics.setdefault(q["topic"], []).append(q)
    table("Topics (ConsumeQueues)", ["topic", "queues", "messages", "min..max offsets per queue"],
          [(t, len(qs), sum(q["messages"] for q in qs),
            ", ".join(f"{q['queue_id']}:{q['min_offset']}..{q['max_offset']}" for q in qs[:8])
            + (" ..." if len(qs) > 8 else "")) for t, qs in sorted(topics.items())], numeric={"queues", "messages"})
    if d["index_files"]:
        table("IndexFiles", ["file", "entries", "begin time", "end time", "physical offsets", "problem"],
              [(i["file"], i["entries"], i["begin_time"], i["end_time"],
                f"{i['begin_phy_offset']}..{i['end_phy_offset']}", i["problem"]) for i in d["index_files"]],
              numeric={"entries"})
    line()
