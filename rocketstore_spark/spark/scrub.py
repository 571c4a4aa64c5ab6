"""The incremental scrub as a Spark job (driver plans, executors scan): ``report.scrub.scrub_stores`` with the
segment scans it chose run as Spark tasks, one a segment (``verify.scrub.check_segment``: only the verdict,
the digest and the findings come back). The cross-checks, when they run, run on the driver in-process
(``verify.store.verify_store`` without BODYCRC, and the recovery report): every executor and the driver must
see the stores at the same paths (a shared mount, or the broker's host).
"""
from __future__ import annotations

from rocketstore_spark.report.scrub import ScrubRun, scrub_stores
from rocketstore_spark.verify.scrub import ROTATION, SegmentTask, check_segment


def scan_on_executors(spark):
    """A ``scan`` for ``scrub_stores``: one Spark task per segment."""
    def scan(tasks: list[SegmentTask], runs: dict[str, int]) -> list[dict]:
        items = [(t, runs[t.root]) for t in tasks]
        return spark.sparkContext.parallelize(items, len(items)).map(lambda item: check_segment(*item)).collect()
    return scan


def scrub(spark, layouts, state_path: str, *, rotation: int = ROTATION, options: dict | None = None,
          broker_conf: str | None = None, work_dir: str | None = None) -> ScrubRun:
    return scrub_stores(layouts, state_path, rotation=rotation, options=options, broker_conf=broker_conf,
                        work_dir=work_dir, scan=scan_on_executors(spark))
