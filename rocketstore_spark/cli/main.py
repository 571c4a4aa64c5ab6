"""The ``rocketstore`` command (the CLI an operator uses on a broker host after an incident).

Every command works on the store files directly, read-only, in this process — no JVM, no Spark — so a first
answer takes seconds; the Spark jobs (jobs/) do the same work on large stores and many stores at once.
``--json`` puts machine output on stdout (diagnostics on stderr); errors are one line naming the path or
option (``--debug`` for the traceback). Exit status: 0 clean, 3 problems found or data at risk, 2 usage
error (bad path, not a store, bad option), 1 internal failure.
"""
from __future__ import annotations

import os
import sys

import click

from rocketstore_spark.cli import (audit, dump, export, ingest, inspection, offsets, query, rebuild, recover,
                                   system, verify)
from rocketstore_spark.cli.output import progress_display
from rocketstore_spark.store.discovery import StorePathError

EXAMPLES = """
\b
Examples (from the repository root, on the bundled sample stores):
  rocketstore inspect tests/golden/rocketmq-5.5.1/clean/store
  rocketstore audit tests/golden/rocketmq-4.9.8/corrupt-body/store
  rocketstore audit tests/golden/rocketmq-5.5.1/corrupt-body/store --html /tmp/audit.html
  rocketstore verify tests/golden/rocketmq-4.9.8/corrupt-body/store
  rocketstore recover report tests/golden/rocketmq-5.5.1/torn-tail/store --json
  rocketstore recover plan tests/golden/rocketmq-4.9.8/corrupt-body/store --output /tmp/plan
  rocketstore recover apply /tmp/plan --output /tmp/repaired-store
  rocketstore offsets tests/golden/rocketmq-5.5.1/consumer-offsets/store --reset-plan to-earliest
  rocketstore query tests/golden/rocketmq-5.5.1/clean/store --topic TopicTest --key order-1
  rocketstore export tests/golden/rocketmq-5.5.1/clean/store --topic TopicTest --output /tmp/topictest.parquet
  rocketstore dump tests/golden/rocketmq-5.5.1/clean/store/commitlog/00000000000000000000 --count 5
  rocketstore rebuild tests/golden/rocketmq-5.5.1/cq-lag-clean/store --output /tmp/rebuilt
  rocketstore system transactions tests/golden/rocketmq-5.5.1/clean/store --all
  rocketstore audit tests/golden/rocketmq-5.5.1/clean/store --scrub /tmp/scrub.json --history /tmp/history
  rocketstore ingest tests/golden/rocketmq-5.5.1/consumer-offsets/store --table /tmp/ingest
"""


class Group(click.Group):
    """Turns the errors a user causes into one line and exit status 2; anything else into exit 1."""

    def invoke(self, ctx):
        # a name from the store that is not UTF-8 (a topic directory, a file name: surrogate escapes) is printed
        # as backslash escapes rather than ending the command with an encoding error
        for stream in (sys.stdout, sys.stderr):
            if hasattr(stream, "reconfigure"):
                stream.reconfigure(errors="backslashreplace")
        show = sys.stderr.isatty() or os.environ.get("ROCKETSTORE_PROGRESS") == "1"
        try:
            with progress_display(show):
                return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except (StorePathError, FileNotFoundError, NotADirectoryError, PermissionError, ValueError) as e:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"rocketstore: {e}", err=True)
            sys.exit(2)
        except Exception as e:                      # noqa: BLE001 — reported in one line, exit 1
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"rocketstore: internal error: {type(e).__name__}: {e} (--debug for the traceback)",
                       err=True)
            sys.exit(1)


@click.group(cls=Group, epilog=EXAMPLES, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="show tracebacks")
@click.pass_context
def cli(ctx, debug):
    """See what is on a RocketMQ broker's disk: read-only, offline, no broker needed."""
    ctx.obj = {"debug": debug}


# one module a command (group), each thin: parse, call the library, print
cli.add_command(inspection.inspect_cmd)
cli.add_command(verify.verify_cmd)
cli.add_command(offsets.offsets_cmd)
cli.add_command(recover.recover)
cli.add_command(rebuild.rebuild_cmd)
cli.add_command(query.query_cmd)
cli.add_command(export.export_cmd)
cli.add_command(audit.audit_cmd)
cli.add_command(dump.dump_cmd)
cli.add_command(system.system)
cli.add_command(ingest.ingest_cmd)


def main() -> None:
    cli(prog_name="rocketstore")


if __name__ == "__main__":
    main()
