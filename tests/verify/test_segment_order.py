"""The in-process verify reads each CommitLog segment from the disk once: every segment's CRC scan is made by the
walk of that segment's dispatch (``verify.store.Dispatched``'s ``scan_crc``), a task a segment, the next segment
read ahead (``store.readahead.ReadAhead``), and dispatch tasks that hold several segments (beyond
MAX_DISPATCH_TASKS) give the verdict of a task a segment. Goldens: RocketMQ's own stores of several small
segments."""
from __future__ import annotations

import os
import threading
import time

from rocketstore_spark.store import readahead
from rocketstore_spark.verify import store as verify_module
from rocketstore_spark.verify.store import verify_store
from tests.golden.goldens import BY_ID

GOLDEN = "5.3.3/crash-stale"            # 8 segments, queues and an IndexFile


def verdict(v) -> tuple:
    return ([(q.topic, q.queue_id, q.min_offset, q.max_offset, [f.as_row() for f in q.findings]) for q in v.queues],
            [f.as_row() for f in v.findings], [(name, s.records, s.data_end) for name, s in v.segments])


def test_each_segment_is_dispatched_and_scanned_by_one_task_in_order(monkeypatch):
    """The pool's work in the order submitted: a dispatch task a segment, whose walk also makes the segment's scan
    (no scan of its own), each asking for the next segment to be read ahead as it starts; the IndexFile checks
    after. The scans equal ``scan_segment``'s."""
    submitted, wanted = [], []

    class Recording(verify_module.ThreadPoolExecutor):
        def submit(self, fn, *args, **kwargs):
            if fn is verify_module.scan_range:
                submitted.append(("dispatch", [base for _, base, *_ in args[0]]))
            else:
                submitted.append((fn.__name__, None))
            return super().submit(fn, *args, **kwargs)
    monkeypatch.setattr(verify_module, "ThreadPoolExecutor", Recording)
    real_want = readahead.ReadAhead.want
    monkeypatch.setattr(readahead.ReadAhead, "want", lambda self, k: wanted.append(k) or real_want(self, k))
    g = BY_ID[GOLDEN]
    v = verify_store(str(g.store))
    bases = [int(name) for name, _ in v.segments]
    assert len(bases) == 8
    expected = [("dispatch", [base]) for base in bases]
    assert submitted[:len(expected)] == expected
    assert {name for name, _ in submitted[len(expected):]} <= {"check_index_file", "<lambda>"}
    assert wanted[0] == -1 and sorted(wanted[1:9]) == list(range(8))
    layout = verify_module.discover(str(g.store))[0]
    root = verify_module.store_root(layout)
    for k, (name, scan) in enumerate(v.segments):
        seg = layout.segments[k]
        alone = verify_module.scan_segment(seg.path, seg.base_offset, followed=layout.followed(k),
                                           check_properties_crc=True, check_times=True)
        alone.findings = [verify_module.relative(f, root) for f in alone.findings]
        scan.findings = [verify_module.relative(f, root) for f in scan.findings]
        assert scan == alone, name


def test_dispatch_tasks_of_several_segments_give_the_verdict_of_a_task_a_segment(monkeypatch):
    g = BY_ID[GOLDEN]
    one = verify_store(str(g.store))
    monkeypatch.setattr(verify_module, "MAX_DISPATCH_TASKS", 3)        # 8 segments in tasks of 2, 3 and 3
    assert verdict(verify_store(str(g.store))) == verdict(one)


def test_read_ahead_reads_one_step_ahead_and_no_further(tmp_path, monkeypatch):
    """``want(k)`` reads the files of step k + 1, CHUNK at a time over the whole file, and never step k + 2."""
    paths = []
    for k, size in enumerate((10, 25, 7)):
        p = tmp_path / f"f{k}"
        p.write_bytes(b"x" * size)
        paths.append(str(p))
    advised = []
    lock = threading.Lock()
    real_open = os.open
    names = {}

    def opened(path, flags, *a):
        fd = real_open(path, flags, *a)
        names[fd] = os.path.basename(path)
        assert flags == os.O_RDONLY
        return fd

    def advise(fd, offset, length, advice):
        with lock:
            advised.append((names[fd], offset, length, advice))
    monkeypatch.setattr(readahead, "CHUNK", 10)
    monkeypatch.setattr(readahead.os, "open", opened)
    monkeypatch.setattr(readahead.os, "posix_fadvise", advise)

    def until(n):
        deadline = time.monotonic() + 10
        while len(advised) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)                # and nothing more comes
        with lock:
            return list(advised)
    with readahead.ReadAhead([[paths[0]], [paths[1]], [paths[2]]]) as ahead:
        time.sleep(0.1)
        assert advised == []                                    # nothing asked for yet
        ahead.want(-1)
        assert until(1) == [("f0", 0, 10, os.POSIX_FADV_WILLNEED)]
        ahead.want(0)
        ahead.want(0)
        assert until(4)[1:] == [("f1", 0, 10, os.POSIX_FADV_WILLNEED), ("f1", 10, 10, os.POSIX_FADV_WILLNEED),
                                ("f1", 20, 5, os.POSIX_FADV_WILLNEED)]
    assert len(advised) == 4                                    # closed: step 2 never read
