"""The timer store's state as tables (``store.timers`` for the files, ``lookup.timers`` for RocketMQ's restart
and delivery rules on them; one partition per store, read in Spark's Python workers):

* ``spark.read.format("rocketmq_timerlog")``: one row per TimerLog unit (``timerlog/``): its file, position and
  offset, size, prev_pos, magic, write time, delay, delayed time, the timer message's CommitLog offset and size,
  the real topic's hash.
* ``spark.read.format("rocketmq_timerwheel")``: one row per non-zero slot of the ``timerwheel`` file: index,
  time (ms), first and last TimerLog offset, num, magic.
* ``spark.read.format("rocketmq_timers_pending")``: one row per timer a broker restarted on the store would
  still deliver — when it is due, its real topic and queue, its message (``lookup.timers``).

Option ``timerPrecisionMs``: the broker's (default 1000), for wheel times and due slots.
"""
from __future__ import annotations

from rocketstore_spark.datasource.base import TableSource
from rocketstore_spark.datasource.options import TimersOptions
from rocketstore_spark.datasource.schemas import PENDING_TIMERS_SCHEMA, TIMERLOG_SCHEMA, TIMERWHEEL_SCHEMA
from rocketstore_spark.datasource.system_topics import SystemTopicsReader
from rocketstore_spark.store.engines import Work


class TimerLogReader(SystemTopicsReader):
    def tables(self, layout):
        from rocketstore_spark.store.timers import read_timerlog
        yield read_timerlog(layout.files).units


class TimerWheelReader(SystemTopicsReader):
    def tables(self, layout):
        from rocketstore_spark.store.timers import read_wheel_slots, wheel_table
        yield wheel_table(read_wheel_slots(layout.files.timerwheel_path), self.options.timer_precision_ms)


class PendingTimersReader(SystemTopicsReader):
    def tables(self, layout):
        from rocketstore_spark.lookup.timers import timers
        yield timers(layout, precision_ms=self.options.timer_precision_ms).pending


class TimerLogDataSource(TableSource):
    """The TimerLog's units."""
    NAME = "rocketmq_timerlog"
    SCHEMA = TIMERLOG_SCHEMA
    OPTIONS = TimersOptions
    READER = TimerLogReader


class TimerWheelDataSource(TableSource):
    """The timer wheel's non-zero slots."""
    NAME = "rocketmq_timerwheel"
    SCHEMA = TIMERWHEEL_SCHEMA
    OPTIONS = TimersOptions
    READER = TimerWheelReader


class PendingTimersDataSource(TableSource):
    """Timers not yet delivered, with their due time (TimerMessageStore's view after a restart)."""
    NAME = "rocketmq_timers_pending"
    WORK = Work.READ_COMMITLOG
    SCHEMA = PENDING_TIMERS_SCHEMA
    OPTIONS = TimersOptions
    READER = PendingTimersReader
