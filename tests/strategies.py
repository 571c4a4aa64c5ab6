"""Hypothesis strategies shared by the round-trip tests."""
from __future__ import annotations

from hypothesis import strategies as st

from rocketstore_spark.codec.encode import Message

TOPIC_CHARS = "%|abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
# property names/values: anything but the separators (a value may hold 0x01), including non-BMP text
NAME = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=12)
VALUE = st.text(st.characters(blacklist_characters="\x02", blacklist_categories=("Cs",)), min_size=1, max_size=40) \
    .filter(lambda v: not v.startswith("\x01") or len(v) > 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
IPV4 = st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)) \
    .map(lambda t: ".".join(map(str, t)))
IPV6 = st.lists(st.integers(0, 0xFFFF), min_size=8, max_size=8).map(lambda g: ":".join(f"{x:x}" for x in g))
HOST = st.tuples(st.one_of(IPV4, IPV6), st.integers(0, 65535))


@st.composite
def messages(draw, max_body: int = 2048) -> Message:
    props = draw(st.dictionaries(NAME, VALUE, max_size=6))
    if draw(st.booleans()):
        props["TAGS"] = draw(VALUE)
    if draw(st.booleans()):
        props["KEYS"] = " ".join(draw(st.lists(st.text("abc 键😀", max_size=5), max_size=4)))
    return Message(
        topic=draw(st.text(TOPIC_CHARS, min_size=1, max_size=200)),
        body=draw(st.binary(max_size=max_body)),
        queue_id=draw(st.integers(0, 1023)), flag=draw(INT32),
        sys_flag=draw(st.sampled_from([0, 0x1, 0x2, 0x4, 0x8, 0xC, 0x301])),
        born_timestamp=draw(st.integers(0, 4102444800000)), store_timestamp=draw(st.integers(0, 4102444800000)),
        born_host=draw(HOST), store_host=draw(HOST), reconsume_times=draw(INT32),
        prepared_transaction_offset=draw(INT64), properties=props,
        trailing_separator=draw(st.booleans()),
    )
