"""``rocketstore inspect | verify | offsets | recover report|plan|apply|rollback | rebuild``: thin commands over
the library (verify.store, verify.offsets, recovery.report/plan/apply, rebuild.output), in-process. Only
``recover apply`` and ``rollback`` change anything: into a new directory, or the store with --in-place."""
from __future__ import annotations

import csv
import os
import sys

import click

from rocketstore_spark.cli.output import SEVERITY_STYLE, emit_json, line, table
from rocketstore_spark.rocketmq.releases import FAMILY_NAMES
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.outputs import outside_stores, store_roots

PROBLEMS = 3


def _ms(ts) -> str | None:
    import datetime as dt
    return None if ts is None else dt.datetime.fromtimestamp(ts / 1000, dt.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S.%f")[:-3]


def _settings_options(rocketmq_version):
    return {"rocketmqVersion": rocketmq_version}


broker_conf_option = click.option("--broker-conf", type=click.Path(exists=True, dir_okay=False),
                                  help="the broker's properties file (broker.conf)")
version_option = click.option("--rocketmq-version", help="the broker's release, e.g. 4.9.8 or 5.5.1 (default: "
                                                         "detected from the store)")
json_option = click.option("--json", "as_json", is_flag=True, help="one JSON document on stdout")
work_dir_option = click.option("--work-dir", type=click.Path(exists=True, file_okay=False),
                               help="where the queue check spills each message's queue entry (36 bytes a "
                                    "message, removed afterwards; never inside a store; a tmpfs /tmp holds them "
                                    "in memory) [default: TMPDIR]")
family_option = click.option("--release-family", type=click.Choice(FAMILY_NAMES),
                             help="mirror this family's recovery regardless of the release")


# ------------------------------------------------------------------------------------------- inspect

@click.command("inspect")
@click.argument("stores", nargs=-1, required=True)
@json_option
def inspect_cmd(stores, as_json):
    """What is in a store: segments, topics and queues, IndexFiles, checkpoint and shutdown state, release.

    \b
    Example:
      rocketstore inspect tests/golden/rocketmq-5.5.1/clean/store
    """
    from rocketstore_spark.rocketmq.consumequeue import queue_bounds
    from rocketstore_spark.rocketmq.settings import resolve
    from rocketstore_spark.store.files import read_checkpoint
    from rocketstore_spark.store.indexes import read_index_file
    from rocketstore_spark.store.scan import scan_segment
    docs = []
    for path in stores:
        for layout in discover(path):
            settings = resolve(layout)
            expired_min_is_max = settings.release.expired_min_is_max
            segs = []
            for k, seg in enumerate(layout.segments):
                s = scan_segment(seg.path, seg.base_offset, check_crc=False, followed=layout.followed(k))
                segs.append({"file": os.path.basename(seg.path), "base_offset": seg.base_offset, "size": seg.size,
                             "records": s.records, "first_store_time": _ms(s.first_store_timestamp),
                             "last_store_time": _ms(s.last_store_timestamp), "valid_end": s.valid_end,
                             "stop": s.stop_reason, "findings": len(s.findings)})
            log_min = layout.segments[0].base_offset if layout.segments else 0
            queues = []
            for topic, queue_id, d in layout.files.queue_dirs():
                lo, hi = queue_bounds(str(d), log_min, expired_min_is_max)
                queues.append({"topic": topic, "queue_id": queue_id, "min_offset": lo, "max_offset": hi,
                               "messages": hi - lo, "files": len(layout.files.queue_files(d))})
            index = []
            for p in layout.files.index_files():
                v = read_index_file(str(p), settings.geometry.hash_slot_num if settings.geometry else None)
                index.append({"file": p.name, "entries": v.entry_count, "begin_time": _ms(v.header["begin_timestamp"]),
                              "end_time": _ms(v.header["end_timestamp"]), "begin_phy_offset": v.header["begin_phy_offset"],
                              "end_phy_offset": v.header["end_phy_offset"], "problem": v.problem})
            state = read_checkpoint(layout.files) if layout.files.root is not None else None
            docs.append({
                "store": layout.name, "rocketmq_version": str(settings.release),
                "rocketmq_release": settings.release_label, "release_source": settings.sources.get("rocketmqVersion"),
                "abort_present": bool(state and state.abort_present), "lock_present": bool(state and state.lock_present),
                "checkpoint": state.checkpoint if state else None, "segments": segs, "queues": queues,
                "index_files": index, "layout_findings": [f.render() for f in layout.findings]})
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
        line(f"  checkpoint: physicMsgTimestamp {_ms(cp['physic_msg_timestamp'])}, logicsMsgTimestamp "
             f"{_ms(cp['logics_msg_timestamp'])}, indexMsgTimestamp {_ms(cp['index_msg_timestamp'])}")
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


# -------------------------------------------------------------------------------------------- verify

@click.command("verify")
@click.argument("stores", nargs=-1, required=True)
@broker_conf_option
@version_option
@click.option("--no-crc", is_flag=True, help="skip the BODYCRC check")
@click.option("--limit", default=40, show_default=True, help="findings printed per store (--json has all)")
@work_dir_option
@json_option
def verify_cmd(stores, broker_conf, rocketmq_version, no_crc, limit, work_dir, as_json):
    """Every check of docs/checks.md: BODYCRC past the first failure, CommitLog <-> ConsumeQueue <-> IndexFile,
    checkpoint, consumer offsets. Exit 3 when anything above info level is found.

    \b
    Example:
      rocketstore verify tests/golden/rocketmq-4.9.8/corrupt-body/store
    """
    from rocketstore_spark.checks import Severity
    from rocketstore_spark.verify.store import verify_store
    docs, problems = [], False
    layouts = [layout for path in stores for layout in discover(path)]
    if work_dir:
        outside_stores(work_dir, store_roots(layouts), "work directory")
    for layout in layouts:
        v = verify_store(layout.name, options=_settings_options(rocketmq_version), broker_conf=broker_conf,
                         check_crc=not no_crc, work_dir=work_dir)
        problems |= any(f.severity != Severity.INFO for f in v.findings)
        docs.append(v)
    if as_json:
        emit_json({"stores": [{"store": v.store, "rocketmq_version": str(v.settings.release),
                               "findings": [f.as_row() for f in v.findings]} for v in docs]})
    else:
        order = {"error": 0, "warning": 1, "info": 2}
        for v in docs:
            counts: dict = {}
            for f in v.findings:
                counts[(f.check, str(f.severity))] = counts.get((f.check, str(f.severity)), 0) + 1
            worst = min((str(f.severity) for f in v.findings), key=order.get, default="clean")
            line(f"Store {v.store}: {worst}", "bold")
            line(f"  RocketMQ {v.settings.release_label}; {len(v.queues)} queue(s), {len(v.index)} IndexFile(s); CommitLog "
                 f"{v.log.min_offset:,} .. {v.log.end:,}")
            if counts:
                table(None, ["check", "severity", "findings"],
                      [(c, s, n) for (c, s), n in sorted(counts.items(), key=lambda kv: (order[kv[0][1]], kv[0][0]))],
                      numeric={"findings"}, styles=[SEVERITY_STYLE[s] for (c, s), n in
                                                    sorted(counts.items(), key=lambda kv: (order[kv[0][1]], kv[0][0]))])
                shown = sorted(v.findings, key=lambda f: order[str(f.severity)])[:limit]
                table(None, ["severity", "check", "file", "byte", "physical offset", "queue", "message"],
                      [(str(f.severity), f.check, f.file, f.file_position, f.physical_offset,
                        f"{f.topic}/{f.queue_id}@{f.queue_offset}" if f.topic else None, f.message) for f in shown],
                      numeric={"byte", "physical offset"}, styles=[SEVERITY_STYLE[str(f.severity)] for f in shown])
                if len(v.findings) > limit:
                    line(f"  ... {len(v.findings) - limit} more (--limit, or --json)")
            line()
    sys.exit(PROBLEMS if problems else 0)


# ------------------------------------------------------------------------------------------- offsets

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
    from rocketstore_spark.rocketmq.consumequeue import queue_bounds
    from rocketstore_spark.rocketmq.settings import resolve
    from rocketstore_spark.verify.offsets import check_offsets, reset_plan
    if how in ("to-datetime", "shift-by") and not reset_value:
        raise click.UsageError(f"--reset-plan {how} needs --reset-value")
    layouts = [layout for path in stores for layout in discover(path)]
    if reset_file:
        outside_stores(reset_file, store_roots(layouts), "reset plan")
    lags, plan, findings = [], [], []
    for layout in layouts:
        expired_min_is_max = resolve(layout, _settings_options(rocketmq_version)).release.expired_min_is_max
        log_min = layout.segments[0].base_offset if layout.segments else 0
        bounds = {(t, q): queue_bounds(str(d), log_min, expired_min_is_max) for t, q, d in layout.files.queue_dirs()}
        report = check_offsets(layout, bounds)
        found = [x for x in report.lags if group is None or x.consumer_group == group]
        lags += found
        findings += [f for f in report.findings
                     if group is None or f.evidence.get("consumer_group", group) == group]
        plan += reset_plan(layout, found, how, reset_value, group)
    if reset_file:
        with open(reset_file, "w", newline="") as f:
            w = csv.DictWriter(f, ["store", "consumer_group", "topic", "queue_id", "current_offset", "new_offset"])
            w.writeheader()
            w.writerows(plan)
    if as_json:
        emit_json({"queues": [x.__dict__ for x in lags], "findings": [f.as_row() for f in findings],
                   "reset_plan": {"how": how, "value": reset_value, "queues": plan}})
    else:
        table("Consumer offsets", ["store", "group", "topic", "queue", "offset", "min", "max", "status", "lag",
                                   "oldest unconsumed", "lag (s)"],
              [(x.store, x.consumer_group, x.topic, x.queue_id, x.consumer_offset, x.min_offset, x.max_offset,
                x.status, x.lag, _ms(x.oldest_unconsumed_timestamp),
                None if x.lag_ms is None else round(x.lag_ms / 1000, 3)) for x in lags],
              numeric={"queue", "offset", "min", "max", "lag", "lag (s)"},
              styles=["yellow" if x.status in ("below_min", "beyond_max", "unknown_queue") else None for x in lags])
        table(f"Reset plan ({how}; not applied)", ["store", "group", "topic", "queue", "current", "new"],
              [(p["store"], p["consumer_group"], p["topic"], p["queue_id"], p["current_offset"], p["new_offset"])
               for p in plan], numeric={"queue", "current", "new"})
        if reset_file:
            line(f"plan written to {reset_file} ({len(plan)} row(s))")
    sys.exit(PROBLEMS if findings else 0)


# ------------------------------------------------------------------------------------------- recover

@click.group("recover")
def recover():
    """What RocketMQ's next start would do to a store (report); a repair plan with the export of what it would
    lose (plan); the plan carried out into a copy or, on request, in place (apply), and undone (rollback)."""


@recover.command("report")
@click.argument("store")
@broker_conf_option
@version_option
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
    doc, _ = recovery_report(store, options=_settings_options(rocketmq_version), broker_conf=broker_conf,
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
@broker_conf_option
@version_option
@family_option
@json_option
def recover_plan(store, output, broker_conf, rocketmq_version, release_family, as_json):
    """Export every message a restart would lose (Parquet, every column) and write the repair plan — the
    store is not changed. Exit 3 when the plan has anything to cut or lose.

    \b
    Example:
      rocketstore recover plan tests/golden/rocketmq-4.9.8/corrupt-body/store --output /tmp/plan
    """
    from rocketstore_spark.recovery.plan import make_plan
    from rocketstore_spark.recovery.report import harmful
    plan = make_plan(store, output, options=_settings_options(rocketmq_version), broker_conf=broker_conf,
                     release_family=release_family)
    if as_json:
        emit_json({k: v for k, v in plan.items() if k != "report"})
    else:
        line(f"Plan for {plan['store']} (RocketMQ {plan['rocketmq_version']}) written to {output}/plan.json")
        for k, a in enumerate(plan["actions"], 1):
            detail = ", ".join(f"{key} {val}" for key, val in a.items() if key != "action")
            line(f"  {k}. {a['action']}: {detail}")
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
@json_option
def recover_apply(plan_dir, output, in_place, backup, as_json):
    """Carry out a repair plan: build the repaired store whole (cut segment zero-filled, later segments left
    out, ConsumeQueues and IndexFiles rebuilt, a matching checkpoint, no abort), check that RocketMQ would
    start it without cutting anything more, then publish it with one rename. Refused when the store changed
    since the plan was made or a broker runs on it. Running it again finishes an interrupted apply.

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
    receipt = _apply_errors(apply_plan, plan_dir, output=output, in_place=in_place, backup=backup)
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
         f"{staged['index_files']} IndexFiles rebuilt")
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


# ------------------------------------------------------------------------------------------- rebuild

@click.command("rebuild")
@click.argument("store")
@click.option("--output", required=True, type=click.Path(file_okay=False),
              help="directory for consumequeue/ and index/ (outside the store)")
@broker_conf_option
@version_option
@click.option("--force", is_flag=True, help="rebuild even where settings contradict the store's files")
@json_option
def rebuild_cmd(store, output, broker_conf, rocketmq_version, force, as_json):
    """Rebuild ConsumeQueues and IndexFiles from the CommitLog into a directory outside the store, byte for byte
    what RocketMQ writes, and compare them with the store's own. Exit 3 when they differ.

    \b
    Example:
      rocketstore rebuild tests/golden/rocketmq-5.5.1/cq-lag-clean/store --output /tmp/rebuilt
    """
    from rocketstore_spark.rebuild.output import rebuild_store
    r = rebuild_store(store, output, options=_settings_options(rocketmq_version), broker_conf=broker_conf,
                      allow_conflicts=force)
    changed = [d for d in r.differences if d.status != "identical"]
    if as_json:
        emit_json({"store": r.store, "output": str(r.output), "rocketmq_version": str(r.settings.release),
                   "settings_sources": r.settings.sources, "records": r.records,
                   "queues": [{"topic": q.topic, "queue_id": q.queue_id, "files": q.files,
                               "max_offset": q.state.max_offset} for q in r.queues],
                   "index_files": r.index_files, "findings": [f.as_row() for f in r.findings],
                   "differences": [d.as_row() for d in r.differences]})
    else:
        line(f"Rebuilt {r.store} into {r.output}: {len(r.queues)} queue(s), {len(r.index_files)} IndexFile(s), "
             f"RocketMQ {r.settings.release_label} ({r.settings.sources.get('rocketmqVersion')})")
        line(f"Against the store: {len(r.differences) - len(changed)} file(s) identical, {len(changed)} differ")
        if changed:
            table(None, ["kind", "store file", "rebuilt file", "status", "detail"],
                  [(d.kind, d.store_file, d.rebuilt_file, d.status, d.detail) for d in changed])
    sys.exit(PROBLEMS if changed or r.findings else 0)


# --------------------------------------------------------------------------------------------- query

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
    import base64
    import json as json_

    from rocketstore_spark.lookup import query as q
    ways = [x is not None for x in (key, uniq_key, msg_id, physical_offset, queue_offset)]
    if sum(ways) > 1:
        raise click.UsageError("give one of --key, --uniq-key, --msg-id, --offset, --queue-offset")
    if (key or uniq_key or queue_offset is not None) and not topic:
        raise click.UsageError("--key, --uniq-key and --queue-offset need --topic")
    if queue_offset is not None and queue_id is None:
        raise click.UsageError("--queue-offset needs --queue")
    if not any(ways) and not topic:
        raise click.UsageError("say what to find: --key, --uniq-key, --msg-id, --offset, --queue-offset or --topic")
    window = q.TimeRange(q.parse_time(since), q.parse_time(until))
    want_body = body != "none"
    found = []
    for path in stores:
        for layout in discover(path):
            if key or uniq_key:
                hits = q.by_key(layout, topic, key or uniq_key, window, want_body, uniq=uniq_key is not None)
            elif msg_id:
                hits = q.by_msg_id(layout, msg_id, want_body)
            elif physical_offset is not None:
                hits = q.by_offset(layout, physical_offset, want_body)
            elif queue_offset is not None:
                hits = q.by_queue_offset(layout, topic, queue_id, queue_offset, count, want_body)
            else:
                hits = q.by_topic(layout, topic, window, limit, want_body)
            found += [{"store": layout.name, **h} for h in hits]
    for h in found:
        if want_body:
            raw = h.pop("body")
            h["body"] = raw.hex() if body == "hex" else base64.b64encode(raw).decode() if body == "base64" \
                else raw.decode("utf-8", "replace")
    if as_json:
        for h in found:
            click.echo(json_.dumps(h, ensure_ascii=False, default=str))
    else:
        table(f"{len(found)} message(s)", ["store", "physical offset", "topic", "queue", "queue offset", "store time",
                                           "tags", "keys", "uniq key", "msg id"] + (["body"] if want_body else []),
              [(h["store"], h["physical_offset"], h["topic"], h["queue_id"], h["queue_offset"], h["store_timestamp"],
                h["tags"], " ".join(h["keys"] or []), h["uniq_key"], h["msg_id"])
               + ((h["body"],) if want_body else ()) for h in found],
              numeric={"physical offset", "queue", "queue offset"})
    sys.exit(0 if found else PROBLEMS)


# -------------------------------------------------------------------------------------------- export

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
@json_option
def export_cmd(stores, output, fmt, topic, queue_id, key, uniq_key, tag, since, until, from_offset, to_offset,
               crc_ok_only, as_json):
    """Write a slice of the messages — a topic, a queue, a key, a time window, an offset range — to Parquet or
    JSON lines, with everything needed to publish them again (topic, queue, flag, keys, tags, properties, body;
    JSON bodies in base64). The store is only read. Exit 3 when nothing matched.

    \b
    Examples:
      rocketstore export tests/golden/rocketmq-5.5.1/clean/store --topic TopicTest --output /tmp/topictest.parquet
      rocketstore export tests/golden/rocketmq-5.5.1/clean/store --topic OrderTopic --key order-5 --output /tmp/o.jsonl
    """
    import time

    from rocketstore_spark.lookup.export import Slice, export
    from rocketstore_spark.lookup.query import parse_time
    layouts = [layout for path in stores for layout in discover(path)]
    target = outside_stores(output, store_roots(layouts), "export file")
    if fmt is None:
        fmt = "jsonl" if target.suffix in (".jsonl", ".json", ".ndjson") else "parquet"
    if target.exists():
        raise click.UsageError(f"{target} already exists: give a new file")
    if not target.parent.is_dir():
        raise click.UsageError(f"{target.parent}: no such directory")
    where = Slice(topic=topic, queue_id=queue_id, key=key, uniq_key=uniq_key, tag=tag, since_ms=parse_time(since),
                  until_ms=parse_time(until), from_offset=from_offset, to_offset=to_offset, crc_ok_only=crc_ok_only)
    started = time.monotonic()
    n = export(layouts, target, where, fmt)
    doc = {"output": str(target), "format": fmt, "messages": n, "stores": [layout.name for layout in layouts],
           "seconds": round(time.monotonic() - started, 3)}
    if as_json:
        emit_json(doc)
    else:
        line(f"{n} message(s) written to {target} ({fmt}) in {doc['seconds']} s")
    sys.exit(0 if n else PROBLEMS)


# --------------------------------------------------------------------------------------------- audit

@click.command("audit")
@click.argument("stores", nargs=-1, required=True)
@broker_conf_option
@version_option
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
    import json as json_

    from rocketstore_spark.checks import CHECKS, Severity
    from rocketstore_spark.recovery.report import harmful, recovery_report
    from rocketstore_spark.report.recovery_text import recovery_in_words, render_recovery
    from rocketstore_spark.verify.store import verify_store
    options = _settings_options(rocketmq_version)
    layouts = [layout for path in stores for layout in discover(path)]
    if json_file:
        outside_stores(json_file, store_roots(layouts), "JSON document")
    if work_dir:
        outside_stores(work_dir, store_roots(layouts), "work directory")
    if html_file:
        outside_stores(html_file, store_roots(layouts), "HTML report")
        if not os.path.isdir(os.path.dirname(os.path.abspath(html_file))):
            raise click.UsageError(f"--html {html_file}: its directory does not exist")
    docs, pages, at_risk = [], [], False
    for layout in layouts:
        v = verify_store(layout.name, options=options, broker_conf=broker_conf, work_dir=work_dir)
        rec, _ = recovery_report(layout.name, options=options, broker_conf=broker_conf) \
            if layout.files.root is not None else (None, None)
        areas: dict[str, dict] = {}
        for f in v.findings:
            a = areas.setdefault(CHECKS[f.check].area, {"error": 0, "warning": 0, "info": 0})
            a[str(f.severity)] += 1
        risk = any(f.severity != Severity.INFO for f in v.findings) or bool(rec and harmful(rec))
        at_risk |= risk
        docs.append({"store": layout.name, "rocketmq_version": str(v.settings.release),
                     "rocketmq_release": v.settings.release_label, "at_risk": risk,
                     "areas": areas, "findings": [f.as_row() for f in v.findings], "recovery": rec})
        if html_file:
            from rocketstore_spark.report.html import gather
            pages.append(gather(layout, v, rec))
    if html_file:
        from rocketstore_spark.report.html import write_html
        write_html(html_file, pages)
    if json_file:
        with open(json_file, "w", encoding="utf-8") as f:
            f.write(json_.dumps({"stores": docs}, indent=1, ensure_ascii=False, default=str) + "\n")
    if as_json:
        emit_json({"stores": docs})
    else:
        for d in docs:
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
            order = {"error": 0, "warning": 1, "info": 2}
            first = sorted(d["findings"], key=lambda f: order[f["severity"]])[:15]
            table("Findings that matter first", ["severity", "check", "file", "byte", "message"],
                  [(f["severity"], f["check"], f["file"], f["file_position"], f["message"]) for f in first],
                  numeric={"byte"}, styles=[SEVERITY_STYLE[f["severity"]] for f in first])
            if d["recovery"]:
                line()
                click.echo(render_recovery(d["recovery"]))
            line()
        if json_file:
            line(f"JSON written to {json_file}")
        if html_file:
            line(f"HTML report written to {html_file}")
    sys.exit(PROBLEMS if at_risk else 0)
