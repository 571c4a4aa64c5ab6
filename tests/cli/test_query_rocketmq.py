"""``rocketstore query --key/--uniq-key`` finds what RocketMQ's own index lookup finds (issue #13): for every
KEYS piece and UNIQ_KEY of the golden stores, RocketMQ's ``queryMessage(topic, key, 64, 0, Long.MAX_VALUE)``
(the golden generator's serve-check) is asked, its hits kept where the record carries the key (RocketMQ's
clients filter the same way: an index entry names only a hash), and compared with ours — which has no
64-result limit, so keys RocketMQ answers with a full page are compared as a subset.

Slow: runs RocketMQ (a JDK 17 and Maven, like the golden regeneration).
"""
from __future__ import annotations

import pytest

from rocketstore_spark.lookup import query
from rocketstore_spark.store.discovery import discover
from tests.golden import serve_check
from tests.golden.goldens import all_goldens

MAX_NUM = 64
#: stores RocketMQ serves as they are on disk: where its start deletes or re-dispatches IndexFiles (a crash, a
#: truncated IndexFile on 5.x) it answers from files that are no longer the ones we read
STORES = [g for g in all_goldens() if g.scenario in ("clean", "propcrc", "consumer-offsets")]


@pytest.mark.slow
@pytest.mark.parametrize("g", STORES, ids=[g.id for g in STORES])
def test_query_by_key_returns_what_rocketmq_query_message_returns(g):
    carries: dict[tuple[str, str, bool], set[int]] = {}
    for m in g.messages:
        for key in (m["keys"] or "").split(" "):          # KEYS: pieces separated by spaces, empty ones not indexed
            if key:
                carries.setdefault((m["topic"], key, False), set()).add(m["physical_offset"])
        if m["uniq_key"]:
            carries.setdefault((m["topic"], m["uniq_key"], True), set()).add(m["physical_offset"])
    asked = sorted(carries)
    queries = [{"op": "query", "topic": t, "key": k, "max_num": MAX_NUM} for t, k, _ in asked]
    answers = serve_check.serve(g.version, g.store, queries, settings=g.settings)["answers"]
    layout = discover(str(g.store))[0]
    compared = 0
    for (topic, key, uniq), answer in zip(asked, answers):
        theirs = set(answer["physical_offsets"]) & carries[(topic, key, uniq)]
        ours = {r["physical_offset"] for r in query.by_key(layout, topic, key, uniq=uniq)}
        if len(answer["physical_offsets"]) >= MAX_NUM:
            assert theirs <= ours, (topic, key)
        else:
            assert ours == theirs, (topic, key)
        compared += 1
    assert compared == len(asked) > 100
