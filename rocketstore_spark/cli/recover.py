"""``rocketstore recover report | plan | apply | rollback`` (CLI, in-process): what RocketMQ's next start would
do to a store, the repair plan with the export of what it would lose, the plan carried out and undone — the
work is ``recovery.report``, ``recovery.plan`` and ``recovery.apply``'s. Only ``apply`` and ``rollback``
change anything: into a new directory, or the store with --in-place."""
from __future__ import annotations

import sys

import click

from rocketstore_spark.cli.options import PROBLEMS, family_option, given_settings, json_option, settings_options
from rocketstore_spark.cli.output import emit_json, line


@click.group("recover")
def recover():
    """What RocketMQ's next start would do to a store (report); a repair plan with the export of what it would
    lose (plan); the plan carried out into a copy or, on request, in place (apply), and undone (rollback)."""


@recover.command("report")
@click.argument("store")
@settings_options
@family_option
@json_option
def recover_report(store, broker_conf, rocketmq_version, release_family, as_json):
    """Simulate the broker's recovery without touching the store: where the log would end, what would be cut
    and deleted, and what would be lost. Exit 3 when the restart would lose or cut anything.

    \b
    Example:
      rocketstore recover report tests/golden/rocketmq-5.5.1/torn-tail/store
    """
    from rocketstore_spark.recovery.report import harmful, recovery_report
    from rocketstore_spark.report.recovery_text import render_recovery
    doc, _ = recovery_report(store, options=given_settings(rocketmq_version), broker_conf=broker_conf,
                             release_family=release_family)
    if as_json:
        emit_json(doc)
    else:
        click.echo(render_recovery(doc))
    sys.exit(PROBLEMS if harmful(doc) else 0)


@recover.command("plan")
@click.argument("store")
@click.option("--output", required=True, type=click.Path(file_okay=False),
              help="directory for plan.json and lost-messages.parquet (outside the store)")
@click.option("--reset-offsets-past-end", is_flag=True,
              help="also rewrite the committed consumer offsets past their queue's end in the repaired store to "
                   "that end (config/consumerOffset.json; the file before kept as .bak)")
@settings_options
@family_option
@json_option
def recover_plan(store, output, reset_offsets_past_end, broker_conf, rocketmq_version, release_family, as_json):
    """Export every message a restart would lose (Parquet, every column) and write the repair plan — the
    store is not changed. Exit 3 when the plan has anything to cut or lose; exit 2 when a repair would renumber
    a queue (the plan says which).

    \b
    Example:
      rocketstore recover plan tests/golden/rocketmq-4.9.8/corrupt-body/store --output /tmp/plan
      rocketstore recover plan tests/golden/rocketmq-5.5.1/consumer-offsets/store --output /tmp/plan2 \\
          --reset-offsets-past-end
    """
    from rocketstore_spark.recovery.plan import make_plan
    from rocketstore_spark.recovery.report import harmful
    plan = make_plan(store, output, options=given_settings(rocketmq_version), broker_conf=broker_conf,
                     release_family=release_family, reset_offsets_past_end=reset_offsets_past_end)
    if as_json:
        emit_json({k: v for k, v in plan.items() if k != "report"})
    else:
        line(f"Plan for {plan['store']} (RocketMQ {plan['rocketmq_version']}) written to {output}/plan.json")
        for k, a in enumerate(plan["actions"], 1):
            batch = a["action"] == "cut_batch_queues"
            detail = ", ".join(f"{key} {val}" for key, val in a.items()
                               if key not in ("action", "offsets", "wheel_slots", "touched") and not (batch and key == "queues"))
            line(f"  {k}. {a['action']}: {detail}")
            for o in a.get("offsets", ()):
                line(f"       {o['consumer_group']} {o['topic']}/{o['queue_id']}: {o['before']} -> {o['after']}")
            for q in a["queues"] if batch else ():
                lost = q["lost"]
                line(f"       {q['topic']}/{q['queue_id']}: max offset {q['max_offset_before']} -> {q['max_offset']}, "
                     f"loses {lost['units']} record(s) holding {lost['inner_messages']} message(s)"
                     + (f" (queue offsets {lost['first_queue_offset']}..{lost['last_queue_offset']}; "
                        f"{lost['exported']} exported, {lost['unreadable']} unreadable)" if lost["units"] else ""))
        for text in plan["alternatives"]:
            line(f"  Alternatively: {text}")
        line("Nothing was changed in the store.")
    sys.exit(PROBLEMS if harmful(plan["report"]) else 0)


def _apply_errors(fn, *args, **kwargs):
    """Run an apply/rollback step: a refusal is a usage error (exit 2), a failure while building exit 1; each
    one line."""
    from rocketstore_spark.recovery.apply import ApplyFailed, ApplyRefused
    try:
        return fn(*args, **kwargs)
    except ApplyRefused as e:
        click.echo(f"rocketstore: {e}", err=True)
        sys.exit(2)
    except ApplyFailed as e:
        click.echo(f"rocketstore: {e}", err=True)
        sys.exit(1)


@recover.command("apply")
@click.argument("plan_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--output", type=click.Path(file_okay=False),
              help="build the repaired store here (a new or empty directory outside the store); the store is "
                   "only read")
@click.option("--in-place", is_flag=True, help="replace the store itself (atomically; the old one is kept as a "
                                               "backup beside it)")
@click.option("--backup", type=click.Path(file_okay=False),
              help="with --in-place: where the old store goes (default NAME.before-repair-PLANID beside it; same "
                   "filesystem)")
@click.option("--follow-plan-settings", is_flag=True,
              help="build with the settings the plan recorded even though the broker.conf it was made from has "
                   "changed since (the broker will start with the new file: make a new plan instead if unsure)")
@json_option
def recover_apply(plan_dir, output, in_place, backup, follow_plan_settings, as_json):
    """Carry out a repair plan: build the repaired store whole (cut segment zero-filled, later segments left
    out, ConsumeQueues and IndexFiles rebuilt, a matching checkpoint, no abort), check that RocketMQ would
    start it without cutting anything more, then publish it with one rename. Refused when the store changed
    since the plan was made, when the broker.conf it was made from changed, or a broker runs on it. Running it
    again finishes an interrupted apply.

    
    Examples:
      rocketstore recover plan tests/golden/rocketmq-4.9.8/corrupt-body/store --output /tmp/plan
      rocketstore recover apply /tmp/plan --output /tmp/repaired-store
      rocketstore recover apply /tmp/plan --in-place        # then: rocketstore recover rollback /tmp/plan
    """
    from rocketstore_spark.recovery.apply import apply_plan
    if in_place == (output is not None):
        raise click.UsageError("give either --output DIR (a repaired copy) or --in-place")
    if backup and not in_place:
        raise click.UsageError("--backup goes with --in-place")
    receipt = _apply_errors(apply_plan, plan_dir, output=output, in_place=in_place, backup=backup,
                            follow_plan_settings=follow_plan_settings)
    if as_json:
        emit_json(receipt)
        return
    if receipt.get("already_applied"):
        line(f"Already applied: {receipt['target']} is the repaired store (nothing done).")
        return
    staged = receipt["staged"]
    line(f"Repaired store published at {receipt['target']}"
         + (f"; the old store is kept at {receipt['backup']}" if receipt["mode"] == "in-place" else
            "; the store itself was not changed"))
    end = "no CommitLog segment" if receipt["process_offset"] is None else \
        f"CommitLog ends at {receipt['process_offset']}"
    line(f"  {end}; {staged['cut']} segment cut, {staged['copied']} "
         f"files copied, {staged['linked']} linked; {staged['consumequeues']} ConsumeQueues and "
         f"{staged['index_files']} IndexFiles rebuilt"
         + (f", {staged['kept_queues']} queues kept as RocketMQ's own files (rebuilt, they would be renumbered)"
            if staged.get("kept_queues") else "")
         + (f"; {staged['offsets_reset']} consumer offsets reset to their queue's end (the file before kept as "
            f".bak)" if staged.get("offsets_reset") else ""))
    start = receipt["recovery_after"]["start_file"]
    line(f"  RocketMQ would start it normally{f' from {start}' if start else ''} and cut nothing more; "
         f"{receipt['lost_messages']} messages the cut dropped are in {plan_dir}/lost-messages.parquet")


@recover.command("rollback")
@click.argument("plan_dir", type=click.Path(exists=True, file_okay=False))
@json_option
def recover_rollback(plan_dir, as_json):
    """Undo an in-place apply: the old store goes back in place, the repaired one is kept beside it.

    
    Example:
      rocketstore recover rollback /tmp/plan
    """
    from rocketstore_spark.recovery.apply import rollback
    journal = _apply_errors(rollback, plan_dir)
    if as_json:
        emit_json(journal)
    else:
        line(f"Rolled back: {journal['target']} is the store as it was before the repair; the repaired one is "
             f"kept at {journal['repaired_kept']}")
