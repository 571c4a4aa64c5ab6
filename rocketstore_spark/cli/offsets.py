"""``rocketstore offsets``: consumer lag per group, topic and queue and a reset plan, never applied (CLI,
in-process, read-only; the lag and the plan are ``verify.offsets``')."""
from __future__ import annotations

import sys

import click

from rocketstore_spark.cli.options import PROBLEMS, given_settings, json_option, layouts, version_option
from rocketstore_spark.cli.output import emit_json, line, table
from rocketstore_spark.report.text import utc_time
from rocketstore_spark.store.outputs import outside_stores, store_roots


@click.command("offsets")
@click.argument("stores", nargs=-1, required=True)
@click.option("--reset-plan", "how", type=click.Choice(["as-broker", "to-earliest", "to-latest", "to-datetime",
                                                         "shift-by"]), default="as-broker", show_default=True,
              help="how the plan moves offsets (as-broker: only those out of range, where the broker would)")
@click.option("--reset-value", help="to-datetime: ISO 8601 time (UTC if no zone); shift-by: N")
@click.option("--group", help="only this consumer group")
@click.option("--reset-file", type=click.Path(dir_okay=False), help="write the plan as CSV (never applied)")
@version_option
@json_option
def offsets_cmd(stores, how, reset_value, group, reset_file, rocketmq_version, as_json):
    """Consumer lag per group, topic and queue (messages and time) and a reset plan — never applied.

    \b
    Example:
      rocketstore offsets tests/golden/rocketmq-5.5.1/consumer-offsets/store --reset-plan to-earliest
    """
    from rocketstore_spark.verify.offsets import consumer_lag, write_reset_plan
    if how in ("to-datetime", "shift-by") and not reset_value:
        raise click.UsageError(f"--reset-plan {how} needs --reset-value")
    found = layouts(stores)
    if reset_file:
        outside_stores(reset_file, store_roots(found), "reset plan")
    lag = consumer_lag(found, how, reset_value, group, given_settings(rocketmq_version))
    if reset_file:
        write_reset_plan(lag.plan, reset_file)
    if as_json:
        emit_json({"queues": [x.__dict__ for x in lag.lags], "findings": [f.as_row() for f in lag.findings],
                   "reset_plan": {"how": how, "value": reset_value, "queues": lag.plan}})
    else:
        table("Consumer offsets", ["store", "group", "topic", "queue", "offset", "min", "max", "status", "lag",
                                   "oldest unconsumed", "lag (s)"],
              [(x.store, x.consumer_group, x.topic, x.queue_id, x.consumer_offset, x.min_offset, x.max_offset,
                x.status, x.lag, utc_time(x.oldest_unconsumed_timestamp),
                None if x.lag_ms is None else round(x.lag_ms / 1000, 3)) for x in lag.lags],
              numeric={"queue", "offset", "min", "max", "lag", "lag (s)"},
              styles=["yellow" if x.status in ("below_min", "beyond_max", "unknown_queue") else None
                      for x in lag.lags])
        table(f"Reset plan ({how}; not applied)", ["store", "group", "topic", "queue", "current", "new"],
              [(p["store"], p["consumer_group"], p["topic"], p["queue_id"], p["current_offset"], p["new_offset"])
               for p in lag.plan], numeric={"queue", "current", "new"})
        if reset_file:
            line(f"plan written to {reset_file} ({len(lag.plan)} row(s))")
        for f in lag.findings:
            if f.check not in ("offsets.beyond_max", "offsets.below_min", "offsets.unknown_queue"):  # rows above
                line(f.render(), "red" if str(f.severity) == "error" else "yellow")
    sys.exit(PROBLEMS if lag.findings else 0)
