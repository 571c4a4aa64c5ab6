"""The state the broker keeps in its system topics, as RocketMQ's own services read it: delayed messages not yet
delivered, transactions and how they ended, retried and dead messages per consumer group. Pure: Arrow tables of
decoded records in (``lookup.system_topics`` reads them), Arrow tables out, vectorized (a broker's delay queue
holds millions of messages); runs wherever called (CLI, Spark executor, tests).

Delayed messages (``ScheduleMessageService``: rocketmq-store 4.9.8, rocketmq-broker 5.x, same rules)
    A message sent with delay level L (property ``DELAY``) is stored in ``SCHEDULE_TOPIC_XXXX``, queue L - 1,
    its topic and queue kept in ``REAL_TOPIC`` / ``REAL_QID``; it is due at its store time + the delay of level
    min(L, levels of ``messageDelayLevel``) — the tagsCode of its ConsumeQueue entry (``deliver_time``).
    ``config/delayOffset.json`` holds, per level, the next queue offset to deliver. When the broker loads,
    ``correctDelayOffset`` moves a level's offset into [min, max] of its ConsumeQueue as loaded — a level whose
    queue has no files gets an empty one from ``findConsumeQueue`` (min = max = 0), so its offset becomes 0 —;
    a level the file lacks starts at 0, which the first delivery pass moves the same way (``executeOnTimeUp``).
    Pending: the queue's messages at or after that offset (``delivery_offsets``, ``pending_delayed``). A queue
    beyond the table's levels has no delivery task: all its messages are pending.

Transactions (``TransactionalMessageBridge`` / ``TransactionalMessageServiceImpl``, ``EndTransactionProcessor``;
rocketmq-broker 5.5.1 and 4.9.7 — 4.9.8's broker sources are not published — read)
    A half message is stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` (queue 0 as the broker writes it). Ending it
    (commit or rollback) appends an op message to ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, same queue id, tag ``d``,
    whose body names the half message's queue offset (docs/format/system-topics.md: 4.x one offset, 5.x a
    batch ``"12,15,"``); a commit first writes the final message to the real topic with the COMMIT sysflag and
    ``PREPAREDTRANSACTIONOFFSET`` = the half message's physical offset. The check (group ``CID_RMQ_SYS_TRANS``,
    its offset of the half queue in ``consumerOffset.json``) walks the half queue: a half message no op names is
    put back as a copy (same ``UNIQ_KEY``, ``TRANSACTION_CHECK_TIMES`` + 1) and the producer asked again, about
    the copy; after ``transactionCheckMax`` checks (or older than ``fileReservedTime``) it is discarded — 5.x
    and 4.9.7 copy it to ``TRANS_CHECK_MAX_TIME_TOPIC``. A transaction is all copies with one ``UNIQ_KEY``
    (a half message without one is its own transaction): COMMITTED if a COMMIT record names a copy's physical
    offset; else ROLLED_BACK if an op names a copy's queue offset; else DISCARDED if copied to
    ``TRANS_CHECK_MAX_TIME_TOPIC``, or if the check's offset is past its last copy (nothing else moves it
    there); else PENDING (``transactions``).

Retries and dead letters (``AbstractSendMessageProcessor.consumerSendMsgBack``)
    A message a consumer group sends back goes to ``%RETRY%<group>`` (through a delay level 3 + reconsume
    times) or, past ``retryMaxTimes``, to ``%DLQ%<group>``, with ``RETRY_TOPIC`` = its original topic (set on the
    first send-back), ``ORIGIN_MESSAGE_ID`` and RECONSUMETIMES + 1 (``retries``). The group is the topic's name
    after the prefix as written (5.x pop retry topics add ``_<topic>`` or ``+<topic>`` to it).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore_spark.codec.arrow import TIMESTAMP_TYPE

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRANSACTION_GROUP = "CID_RMQ_SYS_TRANS"             # MixAll.CID_SYS_RMQ_TRANS: the check's consumer group
REMOVE_TAG = "d"                                    # TransactionalMessageUtil.REMOVE_TAG
RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"
COMMIT_TYPE, TRANSACTION_BITS = 0x8, 0xC            # MessageSysFlag.TRANSACTION_COMMIT_TYPE, its bits
STATES = ("COMMITTED", "ROLLED_BACK", "DISCARDED", "PENDING")

# the decoded columns each rule reads (record_schema names)
DELAYED_COLUMNS = ("topic", "queue_id", "queue_offset", "physical_offset", "store_timestamp", "deliver_time",
                   "properties", "uniq_key", "keys", "tags", "msg_id")
HALF_COLUMNS = ("topic", "queue_id", "queue_offset", "physical_offset", "born_timestamp", "store_timestamp",
                "properties", "uniq_key", "keys", "tags")
OP_COLUMNS = ("topic", "queue_id", "queue_offset", "physical_offset", "store_timestamp", "tags", "body")
COMMIT_COLUMNS = ("physical_offset", "sys_flag", "prepared_transaction_offset")
RETRY_COLUMNS = ("topic", "queue_id", "queue_offset", "physical_offset", "born_timestamp", "store_timestamp",
                 "reconsume_times", "properties", "uniq_key", "keys", "tags")

_I32, _I64, _STR = pa.int32(), pa.int64(), pa.string()
PENDING_DELAYED_SCHEMA = pa.schema([
    ("delay_level", _I32), ("queue_offset", _I64), ("delivery_offset", _I64), ("physical_offset", _I64),
    ("store_timestamp", TIMESTAMP_TYPE), ("deliver_time", TIMESTAMP_TYPE), ("real_topic", _STR),
    ("real_queue_id", _I32), ("uniq_key", _STR), ("keys", pa.list_(pa.field("element", _STR))), ("tags", _STR),
    ("msg_id", _STR)])
DELAY_LEVELS_SCHEMA = pa.schema([
    ("delay_level", _I32), ("delay_ms", _I64), ("file_offset", _I64), ("min_offset", _I64), ("max_offset", _I64),
    ("delivery_offset", _I64), ("pending", _I64), ("first_due", TIMESTAMP_TYPE), ("last_due", TIMESTAMP_TYPE)])
TRANSACTIONS_SCHEMA = pa.schema([
    ("transaction_id", _STR), ("state", _STR), ("producer_group", _STR), ("real_topic", _STR),
    ("real_queue_id", _I32), ("keys", pa.list_(pa.field("element", _STR))), ("tags", _STR),
    ("half_queue_id", _I32), ("half_queue_offset", _I64), ("last_half_queue_offset", _I64),
    ("half_physical_offset", _I64), ("copies", _I64), ("check_times", _I32),
    ("born_timestamp", TIMESTAMP_TYPE), ("half_store_timestamp", TIMESTAMP_TYPE),
    ("commit_physical_offset", _I64), ("op_physical_offset", _I64), ("ended_timestamp", TIMESTAMP_TYPE),
    ("pending_ms", _I64)])
RETRIES_SCHEMA = pa.schema([
    ("consumer_group", _STR), ("kind", _STR), ("topic", _STR), ("queue_id", _I32), ("queue_offset", _I64),
    ("physical_offset", _I64), ("original_topic", _STR), ("reconsume_times", _I32), ("origin_message_id", _STR),
    ("uniq_key", _STR), ("keys", pa.list_(pa.field("element", _STR))), ("tags", _STR),
    ("born_timestamp", TIMESTAMP_TYPE), ("store_timestamp", TIMESTAMP_TYPE), ("consumer_offset", _I64),
    ("consumed", pa.bool_())])


def _prop(t: pa.Table, name: str) -> pa.ChunkedArray:
    """The value of property ``name`` of every record (null where it has none)."""
    return pc.map_lookup(t["properties"], name, "first")


def _java_int(values, bits: int = 32) -> pa.Array:
    """Strings parsed as Java's ``Integer.parseInt`` (``bits`` 32) or ``Long.parseLong`` (64) parse them: an
    optional sign, ASCII digits, within range; null where Java throws."""
    values = pc.cast(values, _STR)
    ok = pc.fill_null(pc.match_substring_regex(values, r"^[+-]?[0-9]+$"), False)
    digits = pc.replace_substring_regex(pc.if_else(ok, values, "0"), r"^[+-]?0*", "")
    digits = pc.if_else(pc.equal(digits, ""), "0", digits)
    size = pc.utf8_length(digits)           # 19 digits fit while at most Long.MAX_VALUE's (its MIN_VALUE: null)
    fits = pc.or_(pc.less(size, 19), pc.and_(pc.equal(size, 19), pc.less_equal(digits, str((1 << 63) - 1))))
    ok = pc.and_(ok, fits)
    value = pc.cast(pc.if_else(ok, digits, "0"), _I64)
    value = pc.if_else(pc.starts_with(values, "-"), pc.negate(value), value)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    ok = pc.and_(ok, pc.and_(pc.greater_equal(value, lo), pc.less_equal(value, hi)))
    return pc.if_else(ok, value, pa.scalar(None, _I64))


def _ms_array(ts):
    """Timestamps as epoch milliseconds (int64, nulls kept)."""
    return pc.cast(pc.cast(ts, pa.timestamp("ms", tz="UTC")), _I64)


def _ms(ts) -> np.ndarray:
    """Timestamps as epoch milliseconds (int64; null as INT64_MIN)."""
    return pc.fill_null(_ms_array(ts), np.iinfo(np.int64).min).to_numpy(zero_copy_only=False)


# ----------------------------------------------------------------------------------------- delayed messages

def delivery_offsets(levels: int, file_offsets: dict[int, int], bounds: dict[int, tuple[int, int]]
                     ) -> dict[int, int]:
    """Delay level -> the first queue offset ScheduleMessageService delivers once the broker has loaded
    (module docstring). ``file_offsets``: delayOffset.json's offsetTable; ``bounds``: queue id -> RocketMQ's
    (min, max) offsets of that SCHEDULE_TOPIC_XXXX queue after load (a queue it lacks: (0, 0), empty)."""
    out = {}
    for level in range(1, levels + 1):
        lo, hi = bounds.get(level - 1, (0, 0))
        offset = file_offsets.get(level, 0)
        out[level] = hi if offset > hi else lo if offset < lo else offset
    return out


def pending_delayed(records: pa.Table, offsets: dict[int, int]) -> pa.Table:
    """The records of SCHEDULE_TOPIC_XXXX (``DELAYED_COLUMNS``) not yet delivered: queue offset at or after
    their level's delivery offset (``offsets``, from ``delivery_offsets``; a level it lacks: every message),
    in PENDING_DELAYED_SCHEMA, by level and queue offset."""
    records = records.filter(pc.equal(records["topic"], SCHEDULE_TOPIC))
    level = pc.add(records["queue_id"], 1).to_numpy(zero_copy_only=False).astype(np.int64)
    table = np.zeros(max(offsets, default=0) + 1, dtype=np.int64)
    for lv, off in offsets.items():
        table[lv] = off
    known = (level >= 1) & (level < len(table))
    delivery = np.where(known, table[np.clip(level, 0, len(table) - 1)], 0)
    keep = records["queue_offset"].to_numpy(zero_copy_only=False) >= delivery
    t = records.filter(pa.array(keep))
    out = pa.table({
        "delay_level": pa.array(level[keep], _I32), "queue_offset": t["queue_offset"],
        "delivery_offset": pa.array(delivery[keep], _I64), "physical_offset": t["physical_offset"],
        "store_timestamp": t["store_timestamp"], "deliver_time": t["deliver_time"],
        "real_topic": _prop(t, "REAL_TOPIC"), "real_queue_id": pc.cast(_java_int(_prop(t, "REAL_QID")), _I32),
        "uniq_key": t["uniq_key"], "keys": t["keys"], "tags": t["tags"], "msg_id": t["msg_id"]},
        schema=PENDING_DELAYED_SCHEMA)
    return out.sort_by([("delay_level", "ascending"), ("queue_offset", "ascending")])


def delay_levels(stats: pa.Table | None, delay_ms: np.ndarray, file_offsets: dict[int, int],
                 bounds: dict[int, tuple[int, int]], offsets: dict[int, int]) -> pa.Table:
    """One row per delay level of the table (and per other level with pending messages): its delay, the
    offset in delayOffset.json (null: absent), the queue's bounds after load (0, 0 without files), the delivery
    offset, and how many messages are pending with their first and last due time (DELAY_LEVELS_SCHEMA).
    ``stats``: ``pending_delayed`` batches grouped by ``delay_level`` with ``delay_level_count``,
    ``deliver_time_min`` and ``deliver_time_max`` (one row per level and batch)."""
    found = {}
    if stats is not None and stats.num_rows:
        g = stats.group_by("delay_level").aggregate([("delay_level_count", "sum"), ("deliver_time_min", "min"),
                                                     ("deliver_time_max", "max")])
        found = {lv: (n, lo, hi) for lv, n, lo, hi in zip(*(g[c].to_pylist() for c in (
            "delay_level", "delay_level_count_sum", "deliver_time_min_min", "deliver_time_max_max")))}
    rows = {name: [] for name in DELAY_LEVELS_SCHEMA.names}
    for lv in sorted(set(range(1, len(delay_ms) + 1)) | set(found)):      # a level each: a few dozen rows
        n, lo, hi = found.get(lv, (0, None, None))
        b = bounds.get(lv - 1, (0, 0))
        for name, value in zip(DELAY_LEVELS_SCHEMA.names, (
                lv, int(delay_ms[lv - 1]) if lv <= len(delay_ms) else None, file_offsets.get(lv), b[0], b[1],
                offsets.get(lv), n, lo, hi)):
            rows[name].append(value)
    return pa.table(rows, schema=DELAY_LEVELS_SCHEMA)


# ------------------------------------------------------------------------------------------- transactions

NARROW_HALF_SCHEMA = pa.schema([
    ("queue_id", _I32), ("queue_offset", _I64), ("physical_offset", _I64), ("born_timestamp", TIMESTAMP_TYPE),
    ("store_timestamp", TIMESTAMP_TYPE), ("uniq_key", _STR), ("keys", pa.list_(pa.field("element", _STR))),
    ("tags", _STR), ("producer_group", _STR), ("real_topic", _STR), ("real_queue_id", _I32), ("check_times", _I64)])
REMOVALS_SCHEMA = pa.schema([("queue_id", _I32), ("half_queue_offset", _I64), ("op_physical_offset", _I64),
                             ("op_store_timestamp", TIMESTAMP_TYPE)])


def narrow_half(half: pa.Table | None) -> pa.Table:
    """The half messages among ``half``'s records (HALF_COLUMNS) with only what ``transactions`` keeps of them
    (NARROW_HALF_SCHEMA: the properties it reads taken out of the map)."""
    if half is None:
        return NARROW_HALF_SCHEMA.empty_table()
    t = half.filter(pc.equal(half["topic"], HALF_TOPIC))
    return pa.table({
        "queue_id": t["queue_id"], "queue_offset": t["queue_offset"], "physical_offset": t["physical_offset"],
        "born_timestamp": t["born_timestamp"], "store_timestamp": t["store_timestamp"], "uniq_key": t["uniq_key"],
        "keys": t["keys"], "tags": t["tags"], "producer_group": _prop(t, "PGROUP"),
        "real_topic": _prop(t, "REAL_TOPIC"), "real_queue_id": pc.cast(_java_int(_prop(t, "REAL_QID")), _I32),
        "check_times": _java_int(_prop(t, "TRANSACTION_CHECK_TIMES"))}, schema=NARROW_HALF_SCHEMA)


def op_removals(ops: pa.Table | None) -> pa.Table:
    """Every half queue offset the op messages (``OP_COLUMNS``) name: (queue_id, half_queue_offset,
    op_physical_offset, op_store_timestamp), one row per offset named. As ``fillOpRemoveMap``: tag ``d`` only;
    the body as UTF-8 split on ``,`` (a 4.x body holds one offset, for which this is 4.x's reading too); a
    piece ``Long.parseLong`` rejects names nothing (-1 in RocketMQ, below every offset)."""
    if ops is None:
        return REMOVALS_SCHEMA.empty_table()
    ops = ops.filter(pc.and_(pc.equal(ops["topic"], OP_TOPIC), pc.fill_null(pc.equal(ops["tags"], REMOVE_TAG),
                                                                             False)))
    pieces = pc.split_pattern(ops["body"].combine_chunks() if ops.num_rows else pa.array([], pa.binary()), ",")
    parent = pc.list_parent_indices(pieces)
    values = pc.list_flatten(pieces)
    ascii_ = pc.fill_null(pc.match_substring_regex(values, r"^[+-]?[0-9]+$"), False)
    parent, values = pc.filter(parent, ascii_), pc.cast(pc.filter(values, ascii_), _STR)
    offsets = _java_int(values, 64)
    named = pc.fill_null(pc.greater_equal(offsets, 0), False)
    rows = pc.filter(parent, named)
    return pa.table({"queue_id": pc.take(ops["queue_id"], rows), "half_queue_offset": pc.filter(offsets, named),
                     "op_physical_offset": pc.take(ops["physical_offset"], rows),
                     "op_store_timestamp": pc.take(ops["store_timestamp"], rows)}, schema=REMOVALS_SCHEMA)


def transactions(half: pa.Table, removals: pa.Table, commits: pa.Table, discards: pa.Table,
                 check_offsets: dict[int, int], as_of_ms: int | None) -> pa.Table:
    """One row per transaction (module docstring), TRANSACTIONS_SCHEMA, ordered by its first half message.
    ``half``: the half messages (``narrow_half``); ``removals``: what the op messages name (``op_removals``);
    ``commits``: records of any topic (COMMIT_COLUMNS; those without the COMMIT type are passed
    over); ``discards``: the ``uniq_key`` of the records of TRANS_CHECK_MAX_TIME_TOPIC;
    ``check_offsets``: half queue id -> the check's consumer offset (CID_RMQ_SYS_TRANS); ``as_of_ms``: the time a
    pending transaction's age is counted to (null age without it)."""
    n = half.num_rows
    if not n:
        return TRANSACTIONS_SCHEMA.empty_table()
    physical = half["physical_offset"].to_numpy(zero_copy_only=False)
    key = pc.coalesce(half["uniq_key"], pc.binary_join_element_wise("@", pc.cast(half["physical_offset"], _STR), ""))
    queue_id = half["queue_id"].to_numpy(zero_copy_only=False).astype(np.int64)
    queue_offset = half["queue_offset"].to_numpy(zero_copy_only=False)

    # the op naming each copy (the first one appended), and the COMMIT record naming it
    removals = removals.sort_by([("op_physical_offset", "ascending")])
    op_phy, op_ts = _first_match(queue_id << 40 | queue_offset,
                                 pc.add(pc.shift_left(pc.cast(removals["queue_id"], _I64), 40),
                                        removals["half_queue_offset"]).to_numpy(zero_copy_only=False),
                                 removals["op_physical_offset"].to_numpy(zero_copy_only=False),
                                 _ms(removals["op_store_timestamp"]))
    committed = commits.filter(pc.equal(pc.bit_wise_and(commits["sys_flag"], TRANSACTION_BITS), COMMIT_TYPE)) \
        .sort_by([("physical_offset", "ascending")])
    commit_phy, _ = _first_match(physical, committed["prepared_transaction_offset"].to_numpy(zero_copy_only=False),
                                 committed["physical_offset"].to_numpy(zero_copy_only=False),
                                 np.zeros(committed.num_rows, dtype=np.int64))
    none = np.iinfo(np.int64).min
    copies = pa.table({
        "key": key, "row": pa.array(np.arange(n)), "queue_offset": half["queue_offset"],
        "check_times": half["check_times"],
        "commit": pa.array(commit_phy, mask=commit_phy == none), "op": pa.array(op_phy, mask=op_phy == none),
        "op_ts": pa.array(op_ts, mask=op_phy == none)})
    g = copies.group_by("key").aggregate([("row", "min"), ("queue_offset", "max"), ("queue_offset", "count"),
                                          ("check_times", "max"), ("commit", "min"), ("op", "min"), ("op_ts", "min")])
    g = g.sort_by([("row_min", "ascending")])
    first = half.take(g["row_min"])                   # each transaction's first half message

    committed_ = pc.is_valid(g["commit_min"])
    rolled_back = pc.and_(pc.invert(committed_), pc.is_valid(g["op_min"]))
    queues, which = np.unique(first["queue_id"].to_numpy(zero_copy_only=False), return_inverse=True)
    limit = np.array([check_offsets.get(int(q), -1) for q in queues], np.int64)     # a half queue each (one)
    passed = g["queue_offset_max"].to_numpy(zero_copy_only=False) < limit[which]
    moved = pc.is_in(first["uniq_key"], value_set=pc.drop_null(discards["uniq_key"]).combine_chunks()
                     if discards.num_rows else pa.array([], _STR))
    discarded = pc.or_(pa.array(passed), pc.fill_null(moved, False))
    state = pc.if_else(committed_, "COMMITTED", pc.if_else(rolled_back, "ROLLED_BACK",
                                                           pc.if_else(discarded, "DISCARDED", "PENDING")))
    age = pc.subtract(as_of_ms, _ms_array(first["store_timestamp"])) if as_of_ms is not None \
        else pa.nulls(g.num_rows, _I64)
    return pa.table({
        "transaction_id": first["uniq_key"], "state": state, "producer_group": first["producer_group"],
        "real_topic": first["real_topic"], "real_queue_id": first["real_queue_id"],
        "keys": first["keys"], "tags": first["tags"], "half_queue_id": first["queue_id"],
        "half_queue_offset": first["queue_offset"], "last_half_queue_offset": g["queue_offset_max"],
        "half_physical_offset": first["physical_offset"], "copies": g["queue_offset_count"],
        "check_times": pc.cast(g["check_times_max"], _I32), "born_timestamp": first["born_timestamp"],
        "half_store_timestamp": first["store_timestamp"], "commit_physical_offset": g["commit_min"],
        "op_physical_offset": g["op_min"],
        "ended_timestamp": pc.cast(pc.cast(g["op_ts_min"], pa.timestamp("ms", tz="UTC")), TIMESTAMP_TYPE),
        "pending_ms": pc.if_else(pc.equal(state, "PENDING"), age, pa.scalar(None, _I64))},
        schema=TRANSACTIONS_SCHEMA)


def _first_match(keys: np.ndarray, names: np.ndarray, values: np.ndarray, times: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``keys``: (value, time) of the first of ``names`` equal to it (``names`` in the order that
    decides 'first'); INT64_MIN where none is."""
    none = np.iinfo(np.int64).min
    out_v, out_t = np.full(len(keys), none, np.int64), np.full(len(keys), none, np.int64)
    if not len(names):
        return out_v, out_t
    order = np.argsort(names, kind="stable")            # equal names keep their order: the first comes first
    sorted_names = names[order]
    at = np.searchsorted(sorted_names, keys)
    hit = (at < len(sorted_names)) & (sorted_names[np.minimum(at, len(sorted_names) - 1)] == keys)
    pick = order[at[hit]]
    out_v[hit], out_t[hit] = values[pick], times[pick]
    return out_v, out_t


# ------------------------------------------------------------------------------------ retries, dead letters

def retries(records: pa.Table, consumer_offsets: dict[tuple[str, str, int], int]) -> pa.Table:
    """One row per message of a ``%RETRY%`` or ``%DLQ%`` topic (``RETRY_COLUMNS``), RETRIES_SCHEMA, in the
    order given: the group, RETRY or DLQ, the original topic (``RETRY_TOPIC``, else 5.x's ``DLQ_ORIGIN_TOPIC``),
    reconsume times, the original message id (``ORIGIN_MESSAGE_ID``, else ``DLQ_ORIGIN_MESSAGE_ID``), and
    whether the group has consumed it: its committed offset of that queue (``consumer_offsets``: (topic, group,
    queue id) -> offset) is past it; null without one."""
    topic = records["topic"]
    retry = pc.starts_with(topic, RETRY_PREFIX)
    t = records.filter(pc.or_(retry, pc.starts_with(topic, DLQ_PREFIX)))
    retry = pc.starts_with(t["topic"], RETRY_PREFIX)
    group = pc.if_else(retry, pc.utf8_slice_codeunits(t["topic"], len(RETRY_PREFIX)),
                       pc.utf8_slice_codeunits(t["topic"], len(DLQ_PREFIX)))
    offset = pa.nulls(t.num_rows, _I64)
    if consumer_offsets and t.num_rows:
        known = pa.table({"topic": [k[0] for k in consumer_offsets], "group": [k[1] for k in consumer_offsets],
                          "queue_id": pa.array([k[2] for k in consumer_offsets], _I32),
                          "offset": pa.array(list(consumer_offsets.values()), _I64)})
        rows = pa.table({"topic": t["topic"], "group": group, "queue_id": pc.cast(t["queue_id"], _I32),
                         "row": pa.array(np.arange(t.num_rows))})
        joined = rows.join(known, ["topic", "group", "queue_id"]).sort_by("row")
        offset = joined["offset"]
    return pa.table({
        "consumer_group": group, "kind": pc.if_else(retry, "RETRY", "DLQ"), "topic": t["topic"],
        "queue_id": t["queue_id"], "queue_offset": t["queue_offset"], "physical_offset": t["physical_offset"],
        "original_topic": pc.coalesce(_prop(t, "RETRY_TOPIC"), _prop(t, "DLQ_ORIGIN_TOPIC")),
        "reconsume_times": t["reconsume_times"],
        "origin_message_id": pc.coalesce(_prop(t, "ORIGIN_MESSAGE_ID"), _prop(t, "DLQ_ORIGIN_MESSAGE_ID")),
        "uniq_key": t["uniq_key"], "keys": t["keys"], "tags": t["tags"], "born_timestamp": t["born_timestamp"],
        "store_timestamp": t["store_timestamp"], "consumer_offset": offset,
        "consumed": pc.less(t["queue_offset"], offset)}, schema=RETRIES_SCHEMA)
