"""The CommitLog record decoder: the bytes of a window in; an Arrow batch of the requested columns, plus where
and why the walk stopped, out.

Sans-I/O: it never opens a file. Whoever holds the bytes (``store.segment_reader`` over read-only mmap
windows, a test over a byte string) calls ``RecordDecoder.decode`` with the window, the window's position
in its segment file, the file's size and base offset, and the range to walk; it acts on the returned
``Stop`` (refill the window, report damage and resynchronise, or end the segment). Every reader of
records — the Spark source, ``read_table``, segment scans, and the checks and rebuilds built on them —
decodes through this one class, so a column means the same thing everywhere.

One call: walk record starts (``commitlog.walk``, or ``walk_lanes`` when only fixed-width columns are
asked for), decode the header fields those columns need (``record_schema.header_fields_for``), build each
requested column in one compiled pass (no per-record Python). Runs wherever records are read (Spark
executors, the CLI, tests).

A record is returned only where it really lies: one whose stored PHYSICALOFFSET is not base offset +
position (a segment copied under another name, an overlapping copy) is structurally valid but misplaced;
it is left out of the batch and its position reported in ``Decoded.misplaced``, so no physical offset is
ever returned for bytes that say they belong elsewhere. With ``check_crc`` every returned record's BODYCRC is
verified and the failures reported in ``Decoded.crc_failures`` (what verify and ``strict`` act on).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from rocketstore_spark.codec import commitlog, compression, hosts, properties, tiles
from rocketstore_spark.codec.arrow import (RepeatedColumn, binary_array, bool_array, choice_strings, fixed_array,
                                           offsets_array, string_array, timestamp_array, utf8_array)
from rocketstore_spark.codec.commitlog import (MAGIC_V2, TRANSACTION_MASK,
                                               TRANSACTION_TYPES, HeaderColumns, Stop)
from rocketstore_spark.codec.crc32 import crc_ok, gather_checked, prop_crc_ok
from rocketstore_spark.codec.record_schema import BY_NAME, arrow_schema, header_fields_for

DEFAULT_BATCH_ROWS = 4096
DEFAULT_BATCH_BYTES = 16 << 20
FIXED_WIDTH_BATCH_ROWS = 65536
STREAM_AHEAD = 16 << 10
BODY_CAPACITY_MIN = 1 << 20
# the transaction type names back to back, and each one's span there (index = (sys_flag & 0xC) >> 2)
# (zero-padded: choice_strings copies short strings 8 bytes at a time)
_TRANSACTION_BYTES = np.frombuffer("".join(TRANSACTION_TYPES).encode() + bytes(32), dtype=np.uint8)
_TRANSACTION_LENS = np.array([len(t) for t in TRANSACTION_TYPES], dtype=np.int64)
_TRANSACTION_POS = np.cumsum(_TRANSACTION_LENS) - _TRANSACTION_LENS
_INT32_COLUMNS = {"total_size": "total_size", "magic_code": "magic_code", "body_crc": "body_crc",
                  "queue_id": "queue_id", "flag": "flag", "sys_flag": "sys_flag",
                  "reconsume_times": "reconsume_times", "body_length": "body_len"}
_INT64_COLUMNS = ("queue_offset", "stored_physical_offset", "prepared_transaction_offset")
# host_columns' outputs, in the order of its WANT_* flags
_HOST_OUTPUTS = ("born_host", "store_host", "msg_id")
_HOST_COLUMNS = frozenset(_HOST_OUTPUTS)
# property_columns' outputs, in the order of its WANT_* flags
_PROPERTY_OUTPUTS = ("properties", "tags", "keys", "uniq_key", "tags_code", "deliver_time")
_PROPERTY_COLUMNS = frozenset(_PROPERTY_OUTPUTS)


def is_fixed_width(arrow_type: pa.DataType) -> bool:
    """Numbers, booleans, timestamps: no strings, binaries, lists or maps."""
    try:
        return arrow_type.bit_width > 0
    except ValueError:                      # strings, binary, maps, lists
        return False


_NONE = np.zeros(0, dtype=np.int64)
_NO_OFFSETS = np.zeros(1, dtype=np.int32)
_NO_BYTES = np.zeros(0, dtype=np.uint8)
_NO_VERDICTS = np.zeros(0, dtype=np.bool_)


_LAST_NAMES: tuple = (None, [])


def _names(schema: pa.Schema) -> list[str]:
    """``schema.names`` of the schema asked for last time (pyarrow builds the list anew on every access, and
    a reader asks with the same schema for every batch)."""
    global _LAST_NAMES
    last = _LAST_NAMES                  # read once: another thread may replace it meanwhile
    if last[0] is not schema:
        last = _LAST_NAMES = (schema, schema.names)
    return last[1]


@dataclass(frozen=True)
class Decoded:
    """What one ``decode`` call produced. ``output``: what the decoder made of the returned records (None when
    there were none) — for a ``RecordDecoder`` the requested columns by name (``columns``), which ``batch``
    gives as one Arrow batch in the requested order and ``select`` as a batch of another schema with context
    columns added, each built once; a subclass may make something else (``batch`` is then that). ``header``:
    the decoded header fields (numpy, for in-process consumers such as segment scans). The walk stopped at
    ``next_position`` because of ``stop``. ``misplaced``: file positions of walked records left out because
    their stored PHYSICALOFFSET (``misplaced_stored``) names another place; ``crc_failures``: file positions
    of returned records whose body fails BODYCRC (only with ``check_crc``)."""
    output: object
    positions: np.ndarray
    header: HeaderColumns | None
    next_position: int
    stop: Stop
    misplaced: np.ndarray = field(default_factory=lambda: _NONE)
    misplaced_stored: np.ndarray = field(default_factory=lambda: _NONE)
    crc_failures: np.ndarray = field(default_factory=lambda: _NONE)
    schema: pa.Schema | None = None

    @property
    def n(self) -> int:
        return len(self.positions)

    @property
    def columns(self) -> Mapping[str, pa.Array]:
        return self.output

    @cached_property
    def batch(self):
        """The decoded records as an Arrow batch of the requested columns (or the subclass's output)."""
        return self.select(self.schema) if isinstance(self.output, dict) else self.output

    def select(self, schema: pa.Schema, context: Mapping[str, pa.Array] = {}) -> pa.RecordBatch:
        """The batch of ``schema``'s columns: decoded ones, and ``context`` arrays of this batch's length for
        the columns a reader fills (``store``)."""
        columns = self.output
        return pa.RecordBatch.from_arrays([context[name] if name in context else columns[name]
                                           for name in _names(schema)], schema=schema)


class RecordDecoder:
    """Decodes the records of CommitLog windows into Arrow batches of ``columns`` (names of
    ``record_schema.COLUMNS`` other than context columns such as ``store``, which the caller fills).

    ``batch_rows``/``batch_bytes`` bound one batch (default: 4 K rows or 16 MiB of records — a batch stays a
    few MiB on both sides of a Python-to-JVM hop; 64 K rows when every column is fixed-width, where the
    walk is most of the work and runs as interleaved lanes). ``extra_fields``: header fields to decode
    beyond what the columns need (``Decoded.header``). ``message_delay_level``: the broker's delay table,
    for the tagsCode of ``SCHEDULE_TOPIC_XXXX`` records.
    """

    def __init__(self, columns: Sequence[str], *, message_delay_level: str = properties.DEFAULT_DELAY_LEVELS,
                 batch_rows: int | None = None, batch_bytes: int | None = None, lanes: int | None = None,
                 extra_fields: Sequence[str] = (), check_crc: bool = False, fixed_width: bool | None = None):
        self.columns = tuple(columns)
        context = [c for c in self.columns if BY_NAME.get(c) is not None and BY_NAME[c].kind == "context"]
        if context:
            raise ValueError(f"{context} are filled by the reader, not decoded")
        self.schema = arrow_schema(self.columns)
        self.check_crc = check_crc
        crc_fields = ("body_pos", "body_len", "body_crc") if check_crc else ()
        self.fields = (header_fields_for(self.columns) | frozenset(extra_fields) | frozenset(crc_fields)
                       | {"stored_physical_offset"})
        self.delay_ms = properties.parse_delay_levels(message_delay_level)
        # the rows the caller ships decide the batch size (a reader may decode filter columns it drops)
        fixed = fixed_width if fixed_width is not None else all(is_fixed_width(f.type) for f in self.schema)
        self.batch_rows = batch_rows or (FIXED_WIDTH_BATCH_ROWS if fixed else DEFAULT_BATCH_ROWS)
        self.batch_bytes = batch_bytes or ((1 << 62) if fixed else DEFAULT_BATCH_BYTES)
        # interleaved lanes only where a batch may be as large as a window (batch_bytes is not enforced there)
        self.lanes = lanes if lanes is not None else (commitlog.LANES if fixed and batch_bytes is None else 1)
        self._initial_lanes = self.lanes
        # strings and bodies read every byte of a record: the walk prefetches ahead of itself (commitlog.walk)
        self.stream = 0 if fixed else STREAM_AHEAD
        self._lane_rows = self.batch_rows // max(self.lanes, 1)
        self._lane_counts = np.zeros(max(self.lanes, 1), dtype=np.int64)
        # per-batch constants, computed once (a batch's Python overhead is paid ~50 times per 256 MiB)
        self._wanted = frozenset(self.columns)
        self._want_hosts = np.array([c in self._wanted for c in _HOST_OUTPUTS], dtype=np.bool_)
        self._want_properties = np.array([c in self._wanted for c in _PROPERTY_OUTPUTS], dtype=np.bool_)
        self._base_column = (None, None)        # (base offset, RepeatedColumn) of segment_base_offset
        # bodies copied and CRC-checked by the walk's tiles where both are asked for (a plain RecordDecoder
        # only: a subclass makes its own output) into a buffer sized on the last batch's bodies, grown by the
        # walk when a batch needs more
        self._gather_bodies = (type(self).output is RecordDecoder.output and "body_crc_ok" in self._wanted
                               and bool(self._wanted & {"body", "body_uncompressed"}))
        self._body_capacity = BODY_CAPACITY_MIN
        if self._gather_bodies:
            self.fields |= {"body_pos", "body_len", "body_crc"}

    @property
    def reads_every_byte(self) -> bool:
        """Are whole records read (bodies, their CRC, or the ``__CRC32#`` property's CRC of the whole record),
        not only headers and properties? The reader then maps each window whole at once."""
        return self.check_crc or bool(self._wanted & {"body", "body_uncompressed", "body_crc_ok", "properties_crc_ok"})

    # ---------------------------------------------------------------------------------------- walking

    def reset(self) -> None:
        """Forget what earlier ranges taught (lanes given up for small records): a new range starts afresh."""
        self.lanes = self._initial_lanes

    def decode(self, window: np.ndarray, window_position: int, file_size: int, base_offset: int,
               start: int, limit: int) -> Decoded:
        """Walk from file position ``start`` while record starts are < ``limit`` (at most one batch), and
        decode what was walked. ``window`` holds the file's bytes [window_position, window_position +
        len(window)); ``file_size`` bounds records; ``base_offset`` is the segment's."""
        positions = np.empty(self.batch_rows, dtype=np.int64)
        count = -1
        header = None
        if self.lanes > 1:
            count, next_pos, stop = commitlog.walk_lanes(window, window_position, file_size, base_offset, start,
                                                         limit, self.lanes, self._lane_rows, self._lane_counts,
                                                         positions)
            if count < 0 and self._lane_counts.max() >= self._lane_rows:
                # a lane ran out of room: records this small make lanes not worth retrying for this decoder
                self.lanes = 1
            elif count > 0:
                positions = np.concatenate([positions[k * self._lane_rows:k * self._lane_rows + c]
                                            for k, c in enumerate(self._lane_counts)])
        bodies = None
        if count < 0:
            # headers, and bodies with their CRC, taken a tile at a time right behind the walk (tiles.py)
            header = HeaderColumns(self.batch_rows, self.fields)
            body_offsets, body_data, body_ok = self._body_buffers()
            count, next_pos, stop, body_data = tiles.walk_tiles(
                window, window_position, file_size, start, limit, self.batch_rows, self.batch_bytes, positions,
                self.stream, header.want, header.arrays, self._gather_bodies, body_offsets, body_data, body_ok)
            header.cut(count)
            if self._gather_bodies:
                used = int(body_offsets[count])
                bodies = (body_offsets[:count + 1], body_data[:used], body_ok[:count])
                # the body column keeps its whole buffer alive: the next one sized on this batch's bodies (a
                # short batch at a window's end shrinks it only slowly, so the next full one rarely grows it)
                self._body_capacity = max(BODY_CAPACITY_MIN, used + used // 4, self._body_capacity * 3 // 4)
        positions = positions[:count]
        if not count:
            return Decoded(None, positions, None, int(next_pos), Stop(stop))
        if header is None:
            header = HeaderColumns(count, self.fields).decode(window, window_position, positions)
        placed = header.stored_physical_offset == base_offset + positions
        misplaced = misplaced_stored = _NONE
        if np.count_nonzero(placed) != len(placed):
            misplaced, misplaced_stored = positions[~placed], header.stored_physical_offset[~placed]
            positions, header = positions[placed], header.take(placed)
            bodies = None                       # gathered again from the records that stay
            if not len(positions):
                return Decoded(None, positions, None, int(next_pos), Stop(stop), misplaced, misplaced_stored)
        crc_failures, verdicts = _NONE, None
        if self.check_crc:
            verdicts = bodies[2] if bodies is not None else crc_ok(window, header.body_pos, header.body_len,
                                                                   header.body_crc, header.n)
            crc_failures = positions[~verdicts]
        output = self.output(window, window_position, base_offset, positions, header, verdicts, bodies)
        return Decoded(output, positions, header, int(next_pos), Stop(stop), misplaced, misplaced_stored, crc_failures,
                       self.schema)

    # --------------------------------------------------------------------------------------- columns

    def _body_buffers(self):
        """(offsets, data, verdicts) for walk_tiles to gather bodies into, or empty ones when it does not."""
        if not self._gather_bodies:
            return _NO_OFFSETS, _NO_BYTES, _NO_VERDICTS
        return (np.empty(self.batch_rows + 1, dtype=np.int32), np.empty(self._body_capacity, dtype=np.uint8),
                np.empty(self.batch_rows, dtype=np.bool_))

    def output(self, buf: np.ndarray, buf_file_pos: int, base_offset: int, positions: np.ndarray,
               h: HeaderColumns, crc_verdicts: np.ndarray | None = None, bodies: tuple | None = None
               ) -> dict[str, pa.Array]:
        """The requested columns, by name, of the records at file ``positions`` (header ``h`` decoded from
        ``buf``): ``Decoded.output``. ``bodies``: (offsets, data, CRC verdicts) gathered by the walk, where it
        did. Subclasses make other outputs from the same walk."""
        wanted = self._wanted
        n = h.n
        out: dict[str, pa.Array] = {}
        physical = base_offset + positions
        if "segment_base_offset" in wanted:
            if self._base_column[0] != base_offset:
                self._base_column = (base_offset, RepeatedColumn(base_offset, pa.int64()))
            out["segment_base_offset"] = self._base_column[1](n)
        if "file_position" in wanted:
            out["file_position"] = fixed_array(positions)
        if "physical_offset" in wanted:
            out["physical_offset"] = fixed_array(physical)
        for name, header_field in _INT32_COLUMNS.items():
            if name in wanted:
                values = getattr(h, header_field)
                out[name] = fixed_array(values if values.dtype == np.int32 else values.astype(np.int32))
        for name in _INT64_COLUMNS:
            if name in wanted:
                out[name] = fixed_array(getattr(h, name))
        if "record_version" in wanted:
            out["record_version"] = fixed_array((h.magic_code == MAGIC_V2).astype(np.int32) + 1)
        for name in ("born_timestamp", "store_timestamp"):
            if name in wanted:
                out[name] = timestamp_array(getattr(h, name))
        if "transaction_type" in wanted:
            kind = (h.sys_flag & TRANSACTION_MASK) >> 2
            out["transaction_type"] = utf8_array(n, *choice_strings(kind, _TRANSACTION_BYTES, _TRANSACTION_POS,
                                                                    _TRANSACTION_LENS), checked=True)
        # properties first, then topic, the CRC property, hosts and bodies: each pass reads lines the walk
        # just loaded, and the short ones run before the body copy pushes them out of cache
        if wanted & _PROPERTY_COLUMNS:
            out.update(self._property_columns(buf, h, wanted))
        if "topic" in wanted:
            out["topic"] = string_array(buf, h.topic_pos, h.topic_len, n)
        if "properties_crc_ok" in wanted:
            ok, present = prop_crc_ok(buf, positions - buf_file_pos, h.total_size, h.props_len, n)
            out["properties_crc_ok"] = bool_array(ok, present)
        if wanted & _HOST_COLUMNS:
            want = self._want_hosts
            born_offsets, born, store_offsets, store, id_offsets, ids = hosts.host_columns(
                buf, h.born_host_pos if want[hosts.WANT_BORN_HOST] else _NONE,
                h.store_host_pos if want[hosts.WANT_STORE_HOST] or want[hosts.WANT_MSG_ID] else _NONE,
                h.sys_flag, physical, n, want)
            for name, offsets, data in (("born_host", born_offsets, born), ("store_host", store_offsets, store),
                                        ("msg_id", id_offsets, ids)):
                if name in wanted:
                    out[name] = offsets_array(pa.string(), n, offsets, data)
        if bodies is not None:
            offsets, data, crc_verdicts = bodies
            out["body"] = offsets_array(pa.binary(), n, offsets, data)
        elif ("body" in wanted or "body_uncompressed" in wanted) and "body_crc_ok" in wanted and crc_verdicts is None:
            offsets, data, crc_verdicts = gather_checked(buf, h.body_pos, h.body_len, h.body_crc, n)
            out["body"] = offsets_array(pa.binary(), n, offsets, data)
        elif "body" in wanted or "body_uncompressed" in wanted:
            out["body"] = binary_array(buf, h.body_pos, h.body_len, n)
        if "body_uncompressed" in wanted:
            out["body_uncompressed"] = compression.uncompressed_bodies(out["body"], h.sys_flag)
        if "body_crc_ok" in wanted:
            if crc_verdicts is None:
                crc_verdicts = crc_ok(buf, h.body_pos, h.body_len, h.body_crc, n)
            out["body_crc_ok"] = bool_array(crc_verdicts)
        return out

    def _property_columns(self, buf, h: HeaderColumns, wanted: set[str]) -> dict[str, pa.Array]:
        n = h.n
        want = self._want_properties
        topic_pos, topic_len, store_timestamp = (h.topic_pos, h.topic_len, h.store_timestamp) \
            if want[properties.WANT_TAGS_CODE] or want[properties.WANT_DELIVER_TIME] else (_NONE, _NONE, _NONE)
        (pair_offsets, key_offsets, key_data, value_offsets, value_data, tags_offsets, tags_data, tags_valid,
         uniq_offsets, uniq_data, uniq_valid, keys_list_offsets, keys_offsets, keys_data, tags_code, deliver_time,
         deliver_valid, ascii) = properties.property_columns(buf, h.props_pos, h.props_len, topic_pos, topic_len,
                                                      store_timestamp, self.delay_ms, n, want)
        strings = partial(utf8_array, checked=ascii)
        out = {}
        if "properties" in wanted:
            out["properties"] = pa.MapArray.from_arrays(
                fixed_array(pair_offsets), strings(len(key_offsets) - 1, key_offsets, key_data),
                strings(len(value_offsets) - 1, value_offsets, value_data))
        if "tags" in wanted:
            out["tags"] = strings(n, tags_offsets, tags_data, tags_valid)
        if "uniq_key" in wanted:
            out["uniq_key"] = strings(n, uniq_offsets, uniq_data, uniq_valid)
        if "keys" in wanted:
            out["keys"] = pa.ListArray.from_arrays(fixed_array(keys_list_offsets),
                                                   strings(len(keys_offsets) - 1, keys_offsets, keys_data),
                                                   type=BY_NAME["keys"].arrow_type)
        if "tags_code" in wanted:
            out["tags_code"] = fixed_array(tags_code)
        if "deliver_time" in wanted:
            out["deliver_time"] = timestamp_array(deliver_time, deliver_valid)
        return out
