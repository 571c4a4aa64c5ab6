"""The CommitLog record decoder: the bytes of a window in; an Arrow batch of the requested columns, plus where
and why the walk stopped, out.

Sans-I/O: it never opens a file. Whoever holds the bytes (``store.segment_reader`` over read-only mmap
windows, a test over a byte string) calls ``RecordDecoder.decode`` with the window, the window's position
in its segment file, the file's size and base offset, and the range to walk; it acts on the returned
``Stop`` (refill the window, report damage and resynchronise, or end the segment). Every reader of
records — the Spark source, ``read_table``, segment scans, and the checks and rebuilds built on them —
decodes through this one class, so a column means the same thing everywhere.

One call: walk record starts (``tiles.walk_tiles``, or ``commitlog.walk_lanes`` when only fixed-width columns
are asked for), decode the header fields those columns need (``record_schema.header_fields_for``), then write
the whole batch — every requested column — in one compiled call (``batch_writer``) as an Arrow IPC message
that pyarrow reads without a copy (``ipc_batch``): no per-record and almost no per-column Python. Runs
wherever records are read (Spark executors, the CLI, tests).

A record is returned only where it really lies: one whose stored PHYSICALOFFSET is not base offset +
position (a segment copied under another name, an overlapping copy) is structurally valid but misplaced;
it is left out of the batch and its position reported in ``Decoded.misplaced``, so no physical offset is
ever returned for bytes that say they belong elsewhere. With ``check_crc`` every returned record's BODYCRC is
verified and the failures reported in ``Decoded.crc_failures`` (what verify and ``strict`` act on).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from rocketstore_spark.codec import batch_writer, commitlog, compression, ipc_batch, properties, tiles
from rocketstore_spark.codec.arrow import binary_array, valid_utf8
from rocketstore_spark.codec.commitlog import HeaderColumns, Stop
from rocketstore_spark.codec.crc32 import crc_ok
from rocketstore_spark.codec.record_schema import BY_NAME, Family, arrow_schema, header_fields_for

DEFAULT_BATCH_ROWS = 4096
DEFAULT_BATCH_BYTES = 16 << 20
FIXED_WIDTH_BATCH_ROWS = 65536
STREAM_AHEAD = 16 << 10
BODY_CAPACITY_MIN = 1 << 20
REST_CAPACITY_MIN = 1 << 20


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


_NAMES: dict = {}


def _names(schema: pa.Schema) -> list[str]:
    """``schema.names`` of a schema asked for before (pyarrow builds the list anew on every access, and a reader
    asks with the same few schemas for every batch)."""
    known = _NAMES.get(id(schema))
    if known is None or known[0] is not schema:
        if len(_NAMES) > 64:
            _NAMES.clear()
        known = _NAMES[id(schema)] = (schema, schema.names)
    return known[1]


@dataclass(frozen=True)
class Decoded:
    """What one ``decode`` call produced. ``output``: what the decoder made of the returned records (None when
    there were none) — for a ``RecordDecoder`` one Arrow batch of the requested columns (``batch``; ``columns``
    by name; ``select`` gives it in another schema with context columns added); a subclass may make something
    else (``batch`` is then that). ``header``: the decoded header fields (numpy, for in-process consumers such as
    segment scans). The walk stopped at ``next_position`` because of ``stop``. ``misplaced``: file positions of
    walked records left out because their stored PHYSICALOFFSET (``misplaced_stored``) names another place;
    ``crc_failures``: file positions of returned records whose body fails BODYCRC (only with ``check_crc``);
    ``rejected``: positions ``decode_at`` was given where no valid record lies."""
    output: object
    positions: np.ndarray
    header: HeaderColumns | None
    next_position: int
    stop: Stop
    misplaced: np.ndarray = field(default_factory=lambda: _NONE)
    misplaced_stored: np.ndarray = field(default_factory=lambda: _NONE)
    crc_failures: np.ndarray = field(default_factory=lambda: _NONE)
    schema: pa.Schema | None = None
    rejected: np.ndarray = field(default_factory=lambda: _NONE)

    @property
    def n(self) -> int:
        return len(self.positions)

    @cached_property
    def columns(self) -> Mapping[str, pa.Array]:
        """The decoded columns by name (a subclass's output as it is)."""
        batch = self.output
        if not isinstance(batch, pa.RecordBatch):
            return batch
        return {name: batch.column(i) for i, name in enumerate(_names(self.schema))}

    @property
    def batch(self):
        """The decoded records as an Arrow batch of the requested columns (or the subclass's output)."""
        return self.output

    def select(self, schema: pa.Schema, context: Mapping[str, pa.Array] = {}) -> pa.RecordBatch:
        """The batch of ``schema``'s columns: decoded ones, and ``context`` arrays of this batch's length for
        the columns a reader fills (``store``)."""
        batch = self.output
        if not context and schema is self.schema:
            return batch
        names = _names(schema)
        plain = [name for name in names if name not in context]
        if not plain:                           # only context columns: nothing decoded gives the length
            return pa.RecordBatch.from_arrays([context[name] for name in names], schema=schema)
        if _names(self.schema) != plain:        # the decoder read columns the schema does not ship (filters)
            batch = batch.select(plain)
        for i, name in enumerate(names):
            if name in context:
                batch = batch.add_column(i, schema.field(i), context[name])
        if not batch.schema.equals(schema):     # the same columns, other nullability (a decoder made without it)
            batch = pa.RecordBatch.from_arrays(batch.columns, schema=schema)
        return batch


class RecordDecoder:
    """Decodes the records of CommitLog windows into Arrow batches of ``columns`` (names of
    ``record_schema.COLUMNS`` other than context columns such as ``store``, which the caller fills).

    ``batch_rows``/``batch_bytes`` bound one batch (default: 4 K rows or 16 MiB of records — a batch stays a
    few MiB on both sides of a Python-to-JVM hop; 64 K rows when every column is fixed-width, where the
    walk is most of the work and runs as interleaved lanes). ``extra_fields``: header fields to decode
    beyond what the columns need (``Decoded.header``). ``message_delay_level``: the broker's delay table,
    for the tagsCode of ``SCHEDULE_TOPIC_XXXX`` records. ``schema``: the caller's schema for the batches (e.g.
    Spark's, whose fields are nullable where ours are not): its fields, where it has the column, must have our
    types; the batches then carry them.
    """

    #: bytes of DLedger entry header before each record of the segment being read (0: a classic segment); set by
    #: ``store.segment_reader.SegmentReader`` for each range it reads (``commitlog.check_record``)
    frame = 0

    def __init__(self, columns: Sequence[str], *, message_delay_level: str = properties.DEFAULT_DELAY_LEVELS,
                 batch_rows: int | None = None, batch_bytes: int | None = None, lanes: int | None = None,
                 extra_fields: Sequence[str] = (), check_crc: bool = False, fixed_width: bool | None = None,
                 schema: pa.Schema | None = None):
        self.columns = tuple(columns)
        context = [c for c in self.columns if BY_NAME.get(c) is not None and BY_NAME[c].family == Family.CONTEXT]
        if context:
            raise ValueError(f"{context} are filled by the reader, not decoded")
        self.schema = arrow_schema(self.columns)
        if schema is not None:
            theirs = {f.name: f for f in schema}
            ours = {f.name: f for f in self.schema}
            mismatched = [name for name in self.columns if name in theirs
                          and (not theirs[name].type.equals(ours[name].type)
                               or ours[name].nullable and not theirs[name].nullable)]
            if mismatched:
                raise ValueError(f"column(s) {mismatched} of the schema asked for do not have the decoded types "
                                 f"and nullability ({', '.join(str(ours[n]) for n in mismatched)})")
            self.schema = pa.schema([theirs.get(f.name, f) for f in self.schema])
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
        # bodies copied and CRC-checked by the walk's tiles where both are asked for (a plain RecordDecoder
        # only: a subclass makes its own output) into a buffer sized on the last batch's bodies, grown by the
        # walk when a batch needs more
        self._writes_batches = type(self).output is RecordDecoder.output and bool(self.columns)
        self._gather_bodies = (self._writes_batches and "body_crc_ok" in self._wanted
                               and bool(self._wanted & {"body", "body_uncompressed"}))
        self._body_capacity = BODY_CAPACITY_MIN
        if self._gather_bodies:
            self.fields |= {"body_pos", "body_len", "body_crc"}
        if self._writes_batches:
            # a batch is one Arrow IPC message written by batch_writer into an arena: [metadata | bodies | the
            # rest], the rest sized on the last batch's like the bodies
            self._template = ipc_batch.Template(self.schema)
            self._plan = batch_writer.plan(self.columns)
            self._metadata_size = int(self._template.positions[ipc_batch.POS_METADATA_SIZE])
            self._rest_capacity = self._rest_floor = min(REST_CAPACITY_MIN, 4096 + 1024 * self.batch_rows)

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
                                                         positions, self.frame)
            if count < 0 and self._lane_counts.max() >= self._lane_rows:
                # a lane ran out of room: records this small make lanes not worth retrying for this decoder
                self.lanes = 1
            elif count > 0:
                positions = np.concatenate([positions[k * self._lane_rows:k * self._lane_rows + c]
                                            for k, c in enumerate(self._lane_counts)])
        bodies = arena = None
        if count < 0:
            # headers, and bodies with their CRC, taken a tile at a time right behind the walk (tiles.py)
            header = HeaderColumns(self.batch_rows, self.fields)
            body_offsets, body_data, body_ok, arena = self._body_buffers()
            count, next_pos, stop, body_data = tiles.walk_tiles(
                window, window_position, file_size, start, limit, self.batch_rows, self.batch_bytes, positions,
                self.stream, header.want, header.arrays, self._gather_bodies, body_offsets, body_data, body_ok,
                self.frame)
            header.cut(count)
            if self._gather_bodies:
                used = int(body_offsets[count])
                if body_data.ctypes.data != arena.ctypes.data + self._metadata_size:
                    # the walk outgrew the arena: a bigger one, the bodies copied into it (rare: sized on use)
                    arena = ipc_batch.arena(self._metadata_size + used + self._rest_capacity)
                    arena[self._metadata_size:self._metadata_size + used] = body_data[:used]
                bodies = (body_offsets[:count + 1], used, body_ok[:count])
                # the arena stays alive as long as the batch: the next one sized on this batch's bodies (a
                # short batch at a window's end shrinks it only slowly, so the next full one rarely grows it)
                self._body_capacity = max(BODY_CAPACITY_MIN, used + used // 4, self._body_capacity * 3 // 4)
        positions = positions[:count]
        if not count:
            return Decoded(None, positions, None, int(next_pos), Stop(stop))
        return self._finish(window, window_position, base_offset, positions, header, bodies, arena, int(next_pos),
                            Stop(stop))

    def decode_at(self, window: np.ndarray, window_position: int, file_size: int, base_offset: int,
                  positions: np.ndarray) -> Decoded:
        """Decode the records at file ``positions`` (ascending, each lying wholly in ``window``) instead of
        walking to them: what a reader does with offsets a ConsumeQueue names (``lookup.queue_slice``). Each
        is checked as the walk checks a record (magic, TOTALSIZE within bounds and the window, field lengths
        adding up: ``commitlog.check_records``) and placed (stored PHYSICALOFFSET = base offset + position);
        one failing the check is left out and returned in ``Decoded.rejected``, one misplaced in
        ``misplaced``. One compiled check, one header decode and one batch write for the lot: no per-record
        Python. ``next_position`` is the end of the last record returned (``window_position`` if none)."""
        positions = np.ascontiguousarray(positions, dtype=np.int64)
        stops = np.empty(len(positions), dtype=np.int64)
        rejected = _NONE
        if commitlog.check_records(window, window_position, file_size, positions, stops):
            ok = stops == commitlog.NO_STOP
            rejected, positions = positions[~ok], positions[ok]
        if not len(positions):
            return Decoded(None, positions, None, window_position, Stop.LIMIT, rejected=rejected)
        header = HeaderColumns(len(positions), self.fields | {"total_size"}).decode(window, window_position,
                                                                                      positions)
        decoded = self._finish(window, window_position, base_offset, positions, header, None, None,
                               int(positions[-1] + header.total_size[-1]), Stop.LIMIT)
        return dataclasses.replace(decoded, rejected=rejected) if len(rejected) else decoded

    def _finish(self, window, window_position, base_offset, positions, header, bodies, arena, next_pos: int,
                stop: Stop) -> Decoded:
        """The ``Decoded`` of the structurally valid records at ``positions`` (``header`` decoded, or None):
        misplaced ones left out, CRCs checked if asked, the batch written."""
        if header is None:
            header = HeaderColumns(len(positions), self.fields).decode(window, window_position, positions)
        placed = header.stored_physical_offset == base_offset + positions
        misplaced = misplaced_stored = _NONE
        if np.count_nonzero(placed) != len(placed):
            misplaced, misplaced_stored = positions[~placed], header.stored_physical_offset[~placed]
            positions, header = positions[placed], header.take(placed)
            bodies = None                       # gathered again from the records that stay
            if not len(positions):
                return Decoded(None, positions, None, next_pos, stop, misplaced, misplaced_stored)
        crc_failures, verdicts = _NONE, None
        if self.check_crc:
            verdicts = bodies[2] if bodies is not None else crc_ok(window, header.body_pos, header.body_len,
                                                                   header.body_crc, header.n)
            crc_failures = positions[~verdicts]
        if self._writes_batches:
            output = self.output(window, window_position, base_offset, positions, header, verdicts, bodies, arena)
        else:
            output = self.output(window, window_position, base_offset, positions, header, verdicts, bodies)
        return Decoded(output, positions, header, next_pos, stop, misplaced, misplaced_stored, crc_failures,
                       self.schema)

    # --------------------------------------------------------------------------------------- columns

    def _body_buffers(self):
        """(offsets, data, verdicts, arena): the buffers walk_tiles gathers bodies into (empty ones when it does
        not), and the arena of the batch (None for a subclass's output), whose body the bodies' data starts."""
        if not self._writes_batches:
            return _NO_OFFSETS, _NO_BYTES, _NO_VERDICTS, None
        if not self._gather_bodies:
            return _NO_OFFSETS, _NO_BYTES, _NO_VERDICTS, ipc_batch.arena(self._metadata_size + self._rest_capacity)
        arena = ipc_batch.arena(self._metadata_size + self._body_capacity + self._rest_capacity)
        return (np.empty(self.batch_rows + 1, dtype=np.int32), arena[self._metadata_size + batch_writer.BODY_AT:],
                np.empty(self.batch_rows, dtype=np.bool_), arena)

    def output(self, buf: np.ndarray, buf_file_pos: int, base_offset: int, positions: np.ndarray,
               h: HeaderColumns, crc_verdicts: np.ndarray | None = None, bodies: tuple | None = None,
               arena: np.ndarray | None = None) -> pa.RecordBatch:
        """The requested columns of the records at file ``positions`` (header ``h`` decoded from ``buf``) as one
        Arrow batch: ``Decoded.output``, written by ``batch_writer.write_batch`` into ``arena`` (whose body
        holds the bodies the walk gathered: ``bodies`` = (offsets, end, CRC verdicts), else None). Subclasses
        make other outputs from the same walk."""
        if not self.columns:                    # a walk for the header fields only
            return pa.RecordBatch.from_arrays([], schema=self.schema)
        template, m = self._template, self._metadata_size
        if arena is None:
            arena = ipc_batch.arena(m + self._rest_capacity)
        if bodies is not None:
            body_offsets, body_end, verdicts = bodies
        else:
            body_offsets, body_end = _NO_OFFSETS, -1
            verdicts = crc_verdicts if crc_verdicts is not None else _NO_VERDICTS
        arena, size, unchecked, compressed = batch_writer.write_batch(
            arena, (template.metadata, template.positions), self._plan, buf, buf_file_pos, base_offset, positions,
            h.arrays, h.n, (body_end, body_offsets, verdicts), self.delay_ms)
        rest = size - m - (max(body_end, 0) + 7) // 8 * 8
        self._rest_capacity = max(self._rest_floor, rest + rest // 4, self._rest_capacity * 3 // 4)
        batch = template.read(arena[:size])
        if np.count_nonzero(unchecked):
            # strings from bytes that are not all ASCII: validated, malformed UTF-8 replaced (rare)
            for i in np.flatnonzero(unchecked).tolist():
                batch = batch.set_column(i, self.schema.field(i), valid_utf8(batch.column(i)))
        if compressed:
            i = self.columns.index("body_uncompressed")
            stored = batch.column(self.columns.index("body")) if "body" in self._wanted else \
                binary_array(buf, h.body_pos, h.body_len, h.n)
            batch = batch.set_column(i, self.schema.field(i), compression.uncompressed_bodies(stored, h.sys_flag))
        return batch
