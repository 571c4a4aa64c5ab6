"""A producer thread running ahead of its consumer, for the in-process commands that decode on one core and
write on the other (``rebuild``, ``export``). Runs in the calling process."""
from __future__ import annotations

import queue
import threading
from typing import Iterator

AHEAD = 4                       # windows decoded ahead of the writers: bounds the memory a pipeline holds


def ahead(items: Iterator, depth: int = AHEAD) -> Iterator:
    """``items``, produced by a background thread up to ``depth`` ahead of the consumer: e.g. the CommitLog
    decoded (compiled kernels that release the GIL) while the previous windows are placed and written (a
    rebuild) or written to Parquet (an export), so one process keeps two cores busy. An exception in the
    producer is raised in the consumer; a consumer that stops early (or fails) stops the producer."""
    done = object()
    slots: queue.Queue = queue.Queue(depth)
    stop = threading.Event()

    def produce():
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        slots.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            slots.put((done, None))
        except BaseException as e:         # noqa: BLE001 -- handed to the consumer, which raises it
            slots.put((done, e))

    worker = threading.Thread(target=produce, name="ahead", daemon=True)
    worker.start()
    try:
        while True:
            item, error = slots.get()
            if item is done:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        worker.join()
