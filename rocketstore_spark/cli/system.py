"""``rocketstore system delayed | transactions | retries | timers``: the system topics' state an operator asks for after
an incident (CLI, in-process, read-only; the answers are ``lookup.system_topics``')."""
from __future__ import annotations

import os
import sys

import click

from rocketstore_spark.cli.options import PROBLEMS, broker_conf_option, json_option, layouts, version_option
from rocketstore_spark.cli.output import emit_json, findings_table, line, table
from rocketstore_spark.findings import any_problem
from rocketstore_spark.report.text import utc_time

messages_option = click.option("--messages", is_flag=True, help="also list every message, not only the summary")
limit_option = click.option("--limit", type=int, default=100, show_default=True,
                            help="list at most this many (text; --json lists all)")


def _more(total: int, limit: int) -> None:
    """Say how many of ``total`` rows a listing of ``limit`` left out."""
    if total > limit:
        line(f"({total - limit:,} more not listed: --limit, or --json)")


def _met(name: str, findings: list, limit: int) -> None:
    """What reading one store's CommitLog met (damage, bodies failing BODYCRC), when anything: the answers
    above leave those records out."""
    if findings:
        findings_table(findings, limit, f"{name}: what the reading met ({len(findings)} finding(s); the answers "
                                        "above leave those records out)")


def _exit(findings: list) -> None:
    """Exit 3 when the reading met damage: the answers may be missing what it hid."""
    sys.exit(PROBLEMS if any_problem(findings) else 0)


def _rows(t) -> list[dict]:
    """An Arrow table's rows with times as epoch milliseconds (JSON and tables show them alike)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    for name in t.column_names:
        if pa.types.is_timestamp(t.schema.field(name).type):
            t = t.set_column(t.schema.get_field_index(name), name,
                             pc.cast(pc.cast(t[name], pa.timestamp("ms", tz="UTC")), pa.int64()))
    return t.to_pylist()


@click.group("system")
def system():
    """The system topics' state: delayed messages not yet delivered, transactions, retries and dead letters.
    What the reading met (damage, bodies failing BODYCRC) is listed with file and byte ("findings" in --json);
    exit 3 when it met damage."""


@system.command("delayed")
@click.argument("stores", nargs=-1, required=True)
@messages_option
@limit_option
@click.option("--message-delay-level", help="the broker's messageDelayLevel (default: broker.conf, else RocketMQ's)")
@broker_conf_option
@version_option
@json_option
def delayed_cmd(stores, messages, limit, message_delay_level, broker_conf, rocketmq_version, as_json):
    """Delayed messages not yet delivered, per delay level: SCHEDULE_TOPIC_XXXX against delayOffset.json, as
    the broker corrects it when it loads.

    \b
    Example:
      rocketstore system delayed tests/golden/rocketmq-4.9.8/consumer-offsets/store
    """
    from rocketstore_spark.lookup.system_topics import delayed
    options = {"rocketmqVersion": rocketmq_version, "messageDelayLevel": message_delay_level}
    found = [(layout.name, delayed(layout, options, broker_conf, messages)) for layout in layouts(stores)]
    if as_json:
        emit_json({"stores": [{"store": name, "delay_offsets_file": d.offsets_file,
                               "message_delay_level": d.message_delay_level, "levels": _rows(d.levels),
                               **({"pending": _rows(d.pending)} if messages else {}),
                               "findings": [f.as_row() for f in d.findings]} for name, d in found]})
        _exit([f for _, d in found for f in d.findings])
    for name, d in found:
        levels = _rows(d.levels)
        source = f"config/{os.path.basename(d.offsets_file)}" if d.offsets_file else \
            "no delayOffset.json: every level from its queue's start"
        table(f"{name}: {sum(r['pending'] for r in levels):,} delayed message(s) pending (offsets from {source})",
              ["level", "delay (s)", "file offset", "queue min", "queue max", "delivers from", "pending",
               "first due", "last due"],
              [(r["delay_level"], None if r["delay_ms"] is None else r["delay_ms"] / 1000, r["file_offset"],
                r["min_offset"], r["max_offset"], r["delivery_offset"], r["pending"], utc_time(r["first_due"]),
                utc_time(r["last_due"])) for r in levels],
              numeric={"level", "delay (s)", "file offset", "queue min", "queue max", "delivers from", "pending"})
        if messages:
            table("pending messages", ["level", "queue offset", "physical offset", "due", "real topic", "queue",
                                       "uniq key", "keys"],
                  [(r["delay_level"], r["queue_offset"], r["physical_offset"], utc_time(r["deliver_time"]),
                    r["real_topic"], r["real_queue_id"], r["uniq_key"], " ".join(r["keys"] or []))
                   for r in _rows(d.pending.slice(0, limit))], numeric={"level", "queue offset", "physical offset",
                                                                       "queue"})
            _more(d.pending.num_rows, limit)
        _met(name, d.findings, limit)
    _exit([f for _, d in found for f in d.findings])


@system.command("transactions")
@click.argument("stores", nargs=-1, required=True)
@click.option("--state", "states", multiple=True, type=click.Choice(["COMMITTED", "ROLLED_BACK", "DISCARDED",
                                                                     "PENDING"], case_sensitive=False),
              help="list only transactions in this state (repeatable; default: PENDING and DISCARDED)")
@click.option("--all", "show_all", is_flag=True, help="list every transaction")
@limit_option
@json_option
def transactions_cmd(stores, states, show_all, limit, as_json):
    """Transactions from RMQ_SYS_TRANS_HALF_TOPIC and RMQ_SYS_TRANS_OP_HALF_TOPIC: committed, rolled back,
    discarded by the check, or still pending and for how long (to the newest record of the CommitLog).

    \b
    Example:
      rocketstore system transactions tests/golden/rocketmq-5.5.1/clean/store --all
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from rocketstore_spark.lookup.system_topics import transactions
    from rocketstore_spark.rocketmq.system_topics import STATES
    wanted = list(STATES) if show_all else [s.upper() for s in states] or ["PENDING", "DISCARDED"]
    found = []
    for layout in layouts(stores):
        met: list = []
        t, as_of = transactions(layout, findings=met)
        counts = dict.fromkeys(STATES, 0) | {v["values"]: v["counts"] for v in pc.value_counts(t["state"]).to_pylist()}
        found.append((layout.name, as_of, counts, t.filter(pc.is_in(t["state"], pa.array(wanted))), met))
    if as_json:
        emit_json({"stores": [{"store": name, "as_of": as_of, "counts": counts, "transactions": _rows(listed),
                               "findings": [f.as_row() for f in met]}
                              for name, as_of, counts, listed, met in found]})
        _exit([f for *_, met in found for f in met])
    for name, as_of, counts, listed, met in found:
        line(f"{name}: {sum(counts.values()):,} transaction(s): " + ", ".join(
            f"{counts[s]:,} {s.lower().replace('_', ' ')}" for s in STATES)
             + (f" (ages to {utc_time(as_of)}, the newest record)" if as_of is not None else ""))
        rows = _rows(listed.slice(0, limit))
        if rows:
            table(None, ["state", "transaction id", "producer group", "real topic", "queue", "half offset", "copies",
                         "checks", "half stored", "pending (s)", "ended"],
                  [(r["state"], r["transaction_id"], r["producer_group"], r["real_topic"], r["real_queue_id"],
                    r["half_queue_offset"], r["copies"], r["check_times"], utc_time(r["half_store_timestamp"]),
                    None if r["pending_ms"] is None else r["pending_ms"] / 1000, utc_time(r["ended_timestamp"]))
                   for r in rows],
                  numeric={"queue", "half offset", "copies", "checks", "pending (s)"},
                  styles=["yellow" if r["state"] == "PENDING" else None for r in rows])
            _more(listed.num_rows, limit)
        _met(name, met, limit)
    _exit([f for *_, met in found for f in met])


@system.command("retries")
@click.argument("stores", nargs=-1, required=True)
@click.option("--group", help="only this consumer group")
@messages_option
@limit_option
@json_option
def retries_cmd(stores, group, messages, limit, as_json):
    """Retry and dead-letter topics per consumer group: their original topic, how many messages, how many the
    group has not consumed, the most reconsume times.

    \b
    Example:
      rocketstore system retries tests/golden/rocketmq-5.5.1/consumer-offsets/store
    """
    import pyarrow as pa

    from rocketstore_spark.lookup.system_topics import retries, retry_summary, retry_topics
    from rocketstore_spark.rocketmq.system_topics import DLQ_PREFIX, RETRIES_SCHEMA, RETRY_PREFIX
    out = []
    for layout in layouts(stores):
        topics = retry_topics(layout)
        if group is not None:
            topics = [t for t in topics if t in (RETRY_PREFIX + group, DLQ_PREFIX + group)]
        met: list = []
        batches = list(retries(layout, topics, findings=met))
        listed = (pa.concat_tables(batches) if batches else RETRIES_SCHEMA.empty_table()) if messages else None
        out.append((layout.name, retry_summary(batches), listed, met))
    if as_json:
        emit_json({"stores": [{"store": name, "groups": [{**s.__dict__, "topics": sorted(s.topics)} for s in summary],
                               **({"messages": _rows(listed)} if listed is not None else {}),
                               "findings": [f.as_row() for f in met]}
                              for name, summary, listed, met in out]})
        _exit([f for *_, met in out for f in met])
    for name, summary, listed, met in out:
        table(f"{name}: retry and dead-letter topics", ["group", "kind", "original topic", "messages", "unconsumed",
                                                        "max reconsume", "first stored", "last stored"],
              [(s.consumer_group, s.kind, s.original_topic, s.messages, s.unconsumed, s.max_reconsume_times,
                utc_time(s.first_store_timestamp), utc_time(s.last_store_timestamp)) for s in summary],
              numeric={"messages", "unconsumed", "max reconsume"},
              styles=["yellow" if s.kind == "DLQ" else None for s in summary])
        if listed is not None:
            table("messages", ["topic", "queue", "queue offset", "original topic", "reconsume", "origin msg id",
                               "keys", "stored", "consumed"],
                  [(r["topic"], r["queue_id"], r["queue_offset"], r["original_topic"], r["reconsume_times"],
                    r["origin_message_id"], " ".join(r["keys"] or []), utc_time(r["store_timestamp"]), r["consumed"])
                   for r in _rows(listed.slice(0, limit))], numeric={"queue", "queue offset", "reconsume"})
            _more(listed.num_rows, limit)
        _met(name, met, limit)
    _exit([f for *_, met in out for f in met])


@system.command("timers")
@click.argument("stores", nargs=-1, required=True)
@messages_option
@limit_option
@click.option("--timer-precision-ms", type=int, default=1000, show_default=True, help="the broker's timerPrecisionMs")
@json_option
def timers_cmd(stores, messages, limit, timer_precision_ms, as_json):
    """Timers not yet delivered (5.x timerWheelEnable): the TimerLog and timer wheel as RocketMQ's timer store
    recovers them on a restart, each pending timer with its due time and real topic, plus the timer messages
    of rmq_sys_wheel_timer it has not enqueued yet; timercheck's fields.

    \b
    Example:
      rocketstore system timers tests/golden/timers-5.5.1/crash/store --messages
    """
    from rocketstore_spark.lookup.timers import timers
    found = []
    for layout in layouts(stores):
        met: list = []
        found.append((layout.name, timers(layout, precision_ms=timer_precision_ms, findings=met), met))

    def summary(t) -> dict:
        rec = t.recovered
        return {"timercheck": t.check.__dict__ if t.check else None, "timerlog_files": len(t.timerlog.files),
                "timerlog_units": t.timerlog.units.num_rows, "timerlog_end": rec.process_offset if rec else None,
                "curr_read_time_ms": rec.curr_read_time_ms if rec else None,
                "resume_queue_offset": t.resume_queue_offset, "pending": t.pending.num_rows,
                "unreadable_units": t.unreadable.num_rows, "timing_count": t.metrics}
    if as_json:
        emit_json({"stores": [{"store": name, **summary(t), **({"timers": _rows(t.pending)} if messages else {}),
                               "findings": [f.as_row() for f in met]} for name, t, met in found]})
        _exit([f for *_, met in found for f in met])
    for name, t, met in found:
        if not t.present:
            line(f"{name}: no timer files (timerlog/, timerwheel, config/timercheck)")
            continue
        s = summary(t)
        rows = _rows(t.pending)
        due = [r["due_time"] for r in rows]
        line(f"{name}: {s['pending']:,} timer(s) pending"
             + (f", due {utc_time(min(due))} to {utc_time(max(due))}" if due else "")
             + f"; TimerLog {s['timerlog_units']:,} unit(s) in {s['timerlog_files']} file(s), recovery ends it at "
             f"{s['timerlog_end']:,}; reading resumes at {utc_time(s['curr_read_time_ms'])}, enqueueing at "
             f"rmq_sys_wheel_timer/0 offset {s['resume_queue_offset']}")
        if t.unreadable.num_rows:
            line(f"{t.unreadable.num_rows:,} unit(s) of the wheel's chains point to no timer message of the "
                 "CommitLog (RocketMQ skips them, or reads whatever the log holds there later)")
        if messages:
            table("pending timers", ["due", "source", "real topic", "queue", "physical offset", "timerlog offset",
                                     "uniq key", "keys"],
                  [(utc_time(r["due_time"]), r["source"], r["real_topic"], r["real_queue_id"], r["physical_offset"],
                    r["timerlog_offset"], r["uniq_key"], " ".join(r["keys"] or [])) for r in rows[:limit]],
                  numeric={"queue", "physical offset", "timerlog offset"})
            _more(len(rows), limit)
        _met(name, met, limit)
    _exit([f for *_, met in found for f in met])
