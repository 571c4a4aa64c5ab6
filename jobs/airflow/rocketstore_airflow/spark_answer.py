"""What the DAG's SparkSubmitOperator tasks submit: one of our jobs (jobs/*.py), run in this same Spark driver,
whose exit status is an answer to record rather than a verdict on the task.

    spark-submit ... spark_answer.py --status FILE --stdout FILE -- JOB.py [job arguments]

Our jobs exit 3 when they met damage (store_summary: a segment with findings; ingest: a damaged record):
that is what the DAG wants to know, not a failure. SparkSubmitOperator fails on any non-zero exit of
spark-submit, so this runs the job as spark-submit would (``__main__``, its own directory first on
sys.path, the same session settings: the properties file, JARs and package come from spark-submit), writes
its status (0 or 3) to ``--status`` and what it printed to ``--stdout`` (and the task log), and exits 0.
Any other status (2 a usage error, 1 an internal one) is the job's failure and stays the exit status.

Runs in the Spark driver (client mode: the files it writes are on the Airflow worker), under the
rocketstore-spark virtualenv's Python; imports nothing of Airflow.
"""
from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

ANSWERS = (0, 3)


class Tee:
    """sys.stdout that also writes to a file: the job's report for the alert, and the task log."""

    def __init__(self, stream, file):
        self.stream, self.file = stream, file

    def write(self, s):
        self.file.write(s)
        return self.stream.write(s)

    def flush(self):
        self.file.flush()
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def exit_status(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)              # sys.exit("message"): Python's status 1
    return 1


def run_job(job: str, args: list[str]) -> int:
    """The job's exit status, the job run as ``__main__`` as spark-submit runs a Python application."""
    sys.argv = [job, *args]
    sys.path.insert(0, str(Path(job).resolve().parent))
    try:
        runpy.run_path(job, run_name="__main__")
    except SystemExit as e:
        return exit_status(e)
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="spark_answer", description=__doc__.split("\n\n")[0])
    p.add_argument("--status", required=True, help="file to write the job's exit status to (0 or 3)")
    p.add_argument("--stdout", required=True, help="file to write what the job printed to")
    p.add_argument("job", help="the job's Python file")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the job's arguments (after --)")
    a = p.parse_args(argv)
    args = a.args[1:] if a.args[:1] == ["--"] else a.args
    with open(a.stdout, "w") as out:
        sys.stdout = Tee(sys.__stdout__, out)
        try:
            code = run_job(a.job, args)
        finally:
            sys.stdout.flush()
            sys.stdout = sys.__stdout__
    if code not in ANSWERS:
        return code
    Path(a.status).write_text(f"{code}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
