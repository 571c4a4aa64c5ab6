"""``rocketstore ingest``: the incremental Delta ingest of ``jobs/ingest.py`` from the shell, on a local Spark
session (CLI; the run is ``spark.ingest.ingest_stores``'s, the same as the job's)."""
from __future__ import annotations

import os
import sys

import click

from rocketstore_spark.cli.options import json_option, layouts
from rocketstore_spark.cli.output import emit_json
from rocketstore_spark.store.outputs import outside_stores, store_roots


@click.command("ingest")
@click.argument("stores", nargs=-1, required=True)
@click.option("--table", required=True, type=click.Path(file_okay=False),
              help="directory of the Delta table (created on the first run; never inside a store)")
@click.option("--bodies", is_flag=True, help="also the body and body_uncompressed columns (fixed at creation)")
@click.option("--restart-at", "restart_at", multiple=True, metavar="STORE=OFFSET",
              help="re-ingest STORE from physical offset OFFSET (0, or the end of an ingested record)")
@click.option("--no-snapshots", is_flag=True, help="do not append to TABLE/_snapshots/")
@click.option("--master", default="local[*]", show_default=True, help="the Spark master of the session")
@json_option
def ingest_cmd(stores, table, bodies, restart_at, no_snapshots, master, as_json):
    """Append the CommitLog messages written since the last run to a Delta table, exactly once per record (the
    job jobs/ingest.py on a local Spark session; README: "Incremental ingest into Delta Lake"). Exit 3 when a
    store met damage or was refused, 1 when another run of a store committed first.

    \b
    Example:
      rocketstore ingest tests/golden/rocketmq-5.5.1/consumer-offsets/store --table /tmp/ingest
    """
    from dataclasses import asdict

    from rocketstore_spark.spark.ingest import ingest_stores
    from rocketstore_spark.spark.session import command_session
    from rocketstore_spark.store.engines import Work
    found = layouts(stores)
    for layout in found:
        layout.refuse(Work.READ_COMMITLOG)
    outside_stores(table, store_roots(found), "Delta table")
    names = list(dict.fromkeys(os.path.abspath(layout.name) for layout in found))
    restart = {}
    for item in restart_at:
        store, _, offset = item.rpartition("=")
        if not store or not offset.isdigit():
            raise click.UsageError(f"--restart-at {item!r}: expected STORE=OFFSET, OFFSET a physical offset")
        if os.path.abspath(store) not in names:
            raise click.UsageError(f"--restart-at names {store}, which is not among the stores given")
        restart[os.path.abspath(store)] = int(offset)
    with command_session("rocketstore-ingest", master=master) as spark:
        code, runs, run_id = ingest_stores(spark, table, names, bodies, restart, snapshots=not no_snapshots,
                                           prog="rocketstore", out=sys.stderr if as_json else sys.stdout)
    if as_json:
        emit_json({"run_id": run_id, "table": os.path.abspath(table), "stores": [asdict(r) for r in runs]})
    sys.exit(code)
