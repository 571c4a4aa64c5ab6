"""How every job (jobs/) starts and ends (driver): arguments and paths checked before Spark starts, the session,
and an error from Spark's workers reported as one line.

A finding raised in an executor (a segment the driver listed but the executor cannot open, ``strict``
damage) reaches the driver wrapped in Py4J and Python tracebacks; the job prints the finding's own line
(``[error] check: file: message``) and exits 1. ``--debug`` (or ``ROCKETSTORE_DEBUG=1``) keeps the traceback.
"""
from __future__ import annotations

import os
import re
import sys

from rocketstore_spark.store.engines import UnsupportedStore

FINDING_LINE = re.compile(r"\[(?:error|warning|info)\] [a-z_]+\.[a-z_]+: [^\n]*")


def run(prog: str, main, check, argv: list[str], delta: bool = True) -> None:
    """``check(argv)`` (exits 2 on a usage error), then ``main(spark, argv)`` on a session; exits with its code."""
    debug = "--debug" in argv or os.environ.get("ROCKETSTORE_DEBUG") == "1"
    argv = [a for a in argv if a != "--debug"]
    check(argv)
    from rocketstore_spark.spark.session import get_spark
    session = get_spark(prog, delta=delta)
    try:
        code = main(session, argv)
    except UnsupportedStore as e:                            # what broker.conf showed once settings resolved
        print(f"{prog}: {e}", file=sys.stderr)
        code = 2
    except Exception as e:                                   # noqa: BLE001 — reported, then exit 1
        found = FINDING_LINE.search(str(e))
        if debug or not found:
            raise
        print(f"{prog}: {found.group(0)}", file=sys.stderr)
        code = 1
    finally:
        session.stop()
    sys.exit(code)
