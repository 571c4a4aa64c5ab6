"""JSON lines built column by column (codec.json_lines) read back as Python's json module reads them, equal to
the values Arrow holds: any text (quotes, backslashes, control characters, non-ASCII), bodies as base64, maps,
lists, timestamps and nulls, on whole and sliced tables. The export of every golden store is checked against
the manifests in tests/cli/test_export.py."""
from __future__ import annotations

import base64
import datetime as dt
import io
import json

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore_spark.codec import json_lines

TEXT = st.one_of(st.none(), st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
                 st.sampled_from(['"', "\\", "\x00", "\x01a\x02", "\n\t", "键😀", "\u2028"]))
SCHEMA = pa.schema([("n", pa.int64()), ("small", pa.int32()), ("ok", pa.bool_()), ("s", pa.string()),
                    ("b", pa.binary()), ("t", pa.timestamp("us", tz="UTC")), ("keys", pa.list_(pa.string())),
                    ("props", pa.map_(pa.string(), pa.string()))])
ROWS = st.lists(st.fixed_dictionaries({
    "n": st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), "small": st.one_of(st.none(), st.integers(-2**31, 2**31 - 1)),
    "ok": st.one_of(st.none(), st.booleans()), "s": TEXT, "b": st.one_of(st.none(), st.binary(max_size=10)),
    "t": st.one_of(st.none(), st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31),
                                            timezones=st.just(dt.timezone.utc))),
    "keys": st.one_of(st.none(), st.lists(TEXT, max_size=3)),
    "props": st.one_of(st.none(), st.dictionaries(TEXT.filter(lambda v: v is not None), TEXT, max_size=3)
                       .map(lambda d: list(d.items())))}), max_size=8)


def lines(table: pa.Table) -> list[dict]:
    out = io.BytesIO()
    json_lines.write_table(table, out)
    text = out.getvalue().decode("utf-8")
    assert text == "" if not table.num_rows else text.endswith("\n")
    return [json.loads(line) for line in text.split("\n")[:-1]]


def expected(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if isinstance(v, bytes):
            v = base64.b64encode(v).decode("ascii")
        elif isinstance(v, dt.datetime):
            v = v.astimezone(dt.timezone.utc)
        elif k == "props" and v is not None:
            v = dict(v)
        out[k] = v
    return out


def parsed(row: dict) -> dict:
    return {k: dt.datetime.fromisoformat(v) if k == "t" and v is not None else v for k, v in row.items()}


@given(rows=ROWS, cut=st.integers(0, 3))
def test_every_row_reads_back_as_the_values_arrow_holds(rows, cut):
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    for t in (table, table.slice(min(cut, table.num_rows))):
        got = lines(t)
        assert [parsed(r) for r in got] == [expected(r) for r in t.to_pylist()]
        assert all(list(r) == t.column_names for r in got)         # members in column order


def test_text_is_escaped_as_json_dumps_does_and_non_ascii_is_kept():
    t = pa.table({"s": ['a"b\\c', "\x00\x1f", "键😀"]})
    out = io.BytesIO()
    json_lines.write_table(t, out)
    assert out.getvalue().decode("utf-8").splitlines() == [json.dumps({"s": v}, ensure_ascii=False, separators=(",", ":"))
                                                          for v in t["s"].to_pylist()]


def test_a_type_without_a_json_form_is_refused():
    with pytest.raises(ValueError, match="no JSON form"):
        json_lines.write_table(pa.table({"x": pa.array([1.5])}), io.BytesIO())
