"""Pushed-down filters: segment pruning on the driver, exact row masks in the worker (pyarrow.compute)."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual

INT64_MAX = (1 << 63) - 1


def _column(f) -> str:
    return f.attribute[0]


def physical_offset_bounds(filters) -> tuple[int, int]:
    """[lo, hi] of physical offsets any matching row can have (inclusive)."""
    lo, hi = 0, INT64_MAX
    for f in filters:
        if _column(f) != "physical_offset":
            continue
        if isinstance(f, EqualTo):
            lo, hi = max(lo, f.value), min(hi, f.value)
        elif isinstance(f, In):
            lo, hi = max(lo, min(f.value, default=INT64_MAX)), min(hi, max(f.value, default=-1))
        elif isinstance(f, GreaterThan):
            lo = max(lo, f.value + 1)
        elif isinstance(f, GreaterThanOrEqual):
            lo = max(lo, f.value)
        elif isinstance(f, LessThan):
            hi = min(hi, f.value - 1)
        elif isinstance(f, LessThanOrEqual):
            hi = min(hi, f.value)
    return lo, hi


def store_allowed(filters, store: str) -> bool:
    for f in filters:
        if _column(f) == "store":
            if isinstance(f, EqualTo) and f.value != store:
                return False
            if isinstance(f, In) and store not in f.value:
                return False
    return True


def _scalar(value, arrow_type):
    # Spark pushes TIMESTAMP literals tz-aware; a naive value can only mean UTC (the session time zone)
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return pa.scalar(value, type=arrow_type)


_OPS = {GreaterThan: pc.greater, GreaterThanOrEqual: pc.greater_equal, LessThan: pc.less,
        LessThanOrEqual: pc.less_equal, EqualTo: pc.equal}


def row_mask(filters, columns: dict[str, pa.Array]) -> pa.Array | None:
    """AND of all pushed filters over the batch's columns (all filter columns must be present)."""
    mask = None
    for f in filters:
        arr = columns[_column(f)]
        if isinstance(f, In):
            m = pc.is_in(arr, value_set=pa.array([_scalar(v, arr.type).as_py() for v in f.value], arr.type))
        else:
            m = _OPS[type(f)](arr, _scalar(f.value, arr.type))
        m = pc.fill_null(m, False)
        mask = m if mask is None else pc.and_(mask, m)
    return mask
