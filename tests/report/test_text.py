"""Plain-text tables: widths bounded, long names elided in the middle, numbers aligned."""
import datetime as dt

from rocketstore_spark.report.text import cell, elide, render_table


def test_elide_keeps_both_ends_and_the_width():
    topic = "orders-" + "x" * 120 + "-eu-west-1"                     # RocketMQ allows 127 characters
    short = elide(topic, 40)
    assert len(short) == 40 and short.startswith("orders-") and short.endswith("-eu-west-1") and "…" in short
    assert elide("abc", 3) == "abc" and elide("abcd", 3) == "a…d" and elide("abcd", 1) == "…"


def test_cells_read_as_operators_expect():
    assert cell(1234567) == "1,234,567" and cell(None) == "-" and cell(True) == "yes"
    assert cell(dt.datetime(2026, 11, 22, 4, 14, 34, 781000)) == "2026-11-22 04:14:34.781"


def test_a_table_is_as_wide_as_its_bounded_columns():
    rows = [("t" * 147, 5), ("short", 1234)]
    lines = render_table(["topic", "messages"], rows, numeric={"messages"}, max_width=40).splitlines()
    assert len(lines) == 4 and {len(line) for line in lines} == {2 + 40 + 2 + 8}
    assert lines[3].endswith("   1,234") and lines[2].endswith("       5")
