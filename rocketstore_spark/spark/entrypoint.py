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
from typing import NoReturn

from rocketstore_spark.store.engines import UnsupportedStore, Work

FINDING_LINE = re.compile(r"\[(?:error|warning|info)\] [a-z_]+\.[a-z_]+: [^\n]*")


def usage_error(prog: str, error: Exception | str) -> NoReturn:
    """One line on stderr, then exit 2: a bad argument or path, found before Spark starts (driver)."""
    print(f"{prog}: {error}", file=sys.stderr)
    sys.exit(2)


def check_stores(prog: str, stores: str | list[str], *, refuse: tuple[Work, ...] = (),
                 allow: frozenset[str] = frozenset(), outputs: tuple[tuple[str | None, str], ...] = (), broker_conf: str | None = None) -> list:
    """The check every job makes on the driver before Spark starts, so that a mistake costs no JVM start-up:
    each path names a store, no engine of a store makes the job's ``refuse`` work wrong (``allow``: engines the
    job handles itself, as ``store.discovery.StoreLayout.refuse`` takes them), every output path
    (``(path, what)``; ``-`` is stdout) lies outside every store, and ``--broker-conf`` names a file. Returns the
    stores' layouts; exits 2 with one line on the first failure."""
    from rocketstore_spark.store.discovery import StorePathError, discover
    from rocketstore_spark.store.outputs import OutputError, outside_stores, store_roots
    try:
        layouts = discover(stores)
        for layout in layouts:
            for work in refuse:
                layout.refuse(work, allow)
        for path, what in outputs:
            if path and path != "-":
                outside_stores(path, store_roots(layouts), what)
    except (StorePathError, OutputError, UnsupportedStore) as e:
        usage_error(prog, e)
    if broker_conf and not os.path.isfile(broker_conf):
        usage_error(prog, f"--broker-conf {broker_conf}: no such file")
    return layouts


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
