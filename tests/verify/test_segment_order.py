"""The in-process verify reads each CommitLog segment from the disk once: every segment's CRC scan is made by the
walk of that segment's dispatch (``verify.store.Dispatched``'s ``scan_crc``), a task a segment, the next segment
read ahead (``store.readahead.ReadAhead``), and dispatch tasks that hold several segments (beyond
MAX_DISPATCH_TASKS) give the verdict of a task a segment. Goldens: RocketMQ's own stores of several small
segments."""
from __future__ import annotations

import os
import threading
import time

import pytest

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
    assert {name for name, _ in submitted[len(expected):]} <= {"check_index", "check_early", "<lambda>"}
    # each segment (smaller than AHEAD_BYTES: one piece) asks for itself and the next as its walk starts
    assert sorted(set(wanted)) == list(range(-1, 8)) and len(wanted) == 16
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
    """``want(k)`` reads the files of step k + 1, ``advice_chunk`` at a time over the whole file, and never step
    k + 2."""
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
        # read-only (non-blocking, so that a FIFO does not hold the thread), nothing created or written
        assert flags & os.O_ACCMODE == os.O_RDONLY and not flags & (os.O_CREAT | os.O_TRUNC | os.O_APPEND)
        return fd

    def advise(fd, offset, length, advice):
        with lock:
            advised.append((names[fd], offset, length, advice))
    monkeypatch.setattr(readahead, "advice_chunk", lambda st_dev: 10)
    monkeypatch.setattr(readahead, "cached", lambda fd, position: False)      # the files were just written
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


def resident(path) -> float:
    """The share of the file's pages the page cache holds (``mincore`` over a private mapping of it)."""
    import ctypes
    import mmap
    size = os.path.getsize(path)
    pages = -(-size // mmap.PAGESIZE)
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    try:
        address = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        vec = (ctypes.c_ubyte * pages)()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
        assert libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), vec) == 0, ctypes.get_errno()
        return sum(v & 1 for v in vec) / pages
    finally:
        del address
        mm.close()


def test_read_ahead_reads_byte_ranges_in_the_order_asked(tmp_path, monkeypatch):
    """Steps of byte ranges, asked for by passes on two threads out of order: each read once, in the order
    asked, over its range only."""
    path = tmp_path / "segment"
    path.write_bytes(b"x" * 100)
    advised = []
    monkeypatch.setattr(readahead, "advice_chunk", lambda st_dev: 10)
    monkeypatch.setattr(readahead, "cached", lambda fd, position: False)
    monkeypatch.setattr(readahead.os, "posix_fadvise",
                        lambda fd, offset, length, advice: advised.append((offset, length)))
    steps = [[(str(path), at, at + 25)] for at in range(0, 100, 25)]
    with readahead.ReadAhead(steps) as ahead:
        for k in (2, 0, 2, 1, 3):               # 3 is the last step: nothing after it
            ahead.want(k)
        deadline = time.monotonic() + 10
        while len(advised) < 9 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
    assert advised == [(75, 10), (85, 10), (95, 5), (25, 10), (35, 10), (45, 5), (50, 10), (60, 10), (70, 5)]


def test_read_ahead_brings_a_whole_file_into_the_page_cache(tmp_path):
    """A file the page cache does not hold is read ahead whole: Linux reads at most the device's read-ahead per
    WILLNEED call, so a call over more than ``advice_chunk`` (32 MiB chunks on a device reading 8 MiB a call,
    before) left most of each chunk to the passes' page faults."""
    path = tmp_path / "segment"
    with open(path, "wb") as f:
        f.write(os.urandom(1 << 20) * 48)
        f.flush()
        os.fsync(f.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        before = resident(path)
        if before > 0.5:
            pytest.skip("the page cache keeps this file system's pages (tmpfs): nothing to read ahead")
        assert not readahead.cached(fd, 24 << 20)
        with readahead.ReadAhead([[str(path)]]) as ahead:
            ahead.want(-1)
            deadline = time.monotonic() + 10
            while resident(path) < 0.99 and time.monotonic() < deadline:
                time.sleep(0.05)
        assert resident(path) >= 0.99
        assert readahead.cached(fd, 24 << 20) and readahead.cached(fd, (48 << 20) - 1)
    finally:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


def test_read_ahead_skips_what_the_page_cache_holds(tmp_path, monkeypatch):
    """A chunk whose first and last bytes are cached is not asked for again (a store in the page cache costs a
    few reads, not a WILLNEED over every page)."""
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    advised = []
    monkeypatch.setattr(readahead, "advice_chunk", lambda st_dev: 10)
    monkeypatch.setattr(readahead, "cached", lambda fd, position: position < 50)
    monkeypatch.setattr(readahead.os, "posix_fadvise", lambda fd, offset, length, advice: advised.append(offset))
    with readahead.ReadAhead([[str(path)]]) as ahead:
        ahead.want(-1)
        deadline = time.monotonic() + 10
        while len(advised) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
    assert advised == [50, 60, 70, 80, 90]


def test_read_ahead_passes_over_a_fifo_or_directory_where_a_file_was(tmp_path, monkeypatch):
    """A FIFO (or a directory) put where a store file was is skipped: opened blocking, the read-ahead thread
    waited for a writer that never came and the audit hung in ``close`` (the mutation campaign's queue 'fifo'
    case); the regular file after it is still read ahead."""
    fifo, folder, path = tmp_path / "00000000000000000000", tmp_path / "dir", tmp_path / "f"
    os.mkfifo(fifo)
    folder.mkdir()
    path.write_bytes(b"x" * 100)
    advised = []
    monkeypatch.setattr(readahead, "cached", lambda fd, position: False)
    monkeypatch.setattr(readahead.os, "posix_fadvise", lambda fd, offset, length, advice: advised.append(length))
    done = threading.Event()

    def run():
        with readahead.ReadAhead([[str(fifo), str(folder), str(path)]]) as ahead:
            ahead.want(-1)
            deadline = time.monotonic() + 10
            while not advised and time.monotonic() < deadline:
                time.sleep(0.01)
        done.set()
    threading.Thread(target=run, daemon=True).start()
    assert done.wait(15), "the read-ahead is held by the FIFO"
    assert advised == [100]


def test_advice_chunk_is_what_the_device_reads_a_call():
    """The device of this test's own files: its queue's read_ahead_kb and max_sectors_kb, the larger, within the
    bounds; a device sysfs does not know (major 0: tmpfs, overlay) gets the kernel's default read-ahead."""
    chunk = readahead.advice_chunk(os.stat(__file__).st_dev)
    assert readahead.MIN_CHUNK <= chunk <= readahead.MAX_CHUNK
    assert readahead.advice_chunk(os.makedev(0, 12345)) == readahead.MIN_CHUNK


def test_index_files_but_the_newest_are_checked_while_the_log_is_dispatched(monkeypatch):
    """Every IndexFile but the newest is checked on a thread of its own once the dispatch has passed its end
    (``check_early``), against the spilled keys of the tasks done so far: each verdict is the one the check
    gives against the records dispatched again (``verify.index.dispatched_keys``) once the whole log is known.
    Golden: 5.5.1/crash-stale (8 segments, 10 IndexFiles)."""
    from rocketstore_spark.verify.index import check_index_file
    early = []

    class Recording(verify_module.ThreadPoolExecutor):
        def submit(self, fn, *args, **kwargs):
            if fn.__name__ == "check_early":
                early.append(args[0])
            return super().submit(fn, *args, **kwargs)
    monkeypatch.setattr(verify_module, "ThreadPoolExecutor", Recording)
    g = BY_ID["5.5.1/crash-stale"]
    v = verify_store(str(g.store))
    layout = verify_module.discover(str(g.store))[0]
    settings = verify_module.resolve(layout, None, None)
    known = [x for x in verify_module.index_views(layout, settings) if x.geometry is not None]
    assert len(known) == 10 and early == list(range(9))
    root = verify_module.store_root(layout)
    for k, view in enumerate(known):
        alone = check_index_file(layout, view, root, settings.geometry, settings.release,
                                 settings.message_delay_level, v.log, newest=k == len(known) - 1,
                                 previous_end=known[k - 1].header["end_timestamp"] if k else None)
        assert v.index[k] == alone, view.path


def test_pending_log_bounds_wait_for_the_dispatch_or_its_failure():
    pending = verify_module.PendingLog(100)
    assert pending.min_offset == 100
    pending.settle(verify_module.LogBounds(100, 900))
    pending.settle(None, RuntimeError("later"))              # settled once
    assert pending.end == 900
    failed = verify_module.PendingLog(0)
    failed.settle(None, RuntimeError("verify stopped"))
    with pytest.raises(RuntimeError, match="verify stopped"):
        failed.end
