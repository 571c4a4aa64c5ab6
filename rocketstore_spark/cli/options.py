"""What the ``rocketstore`` commands share (CLI, in-process): the options several take, the settings they
pass on, the stores named on the command line, and the exit status for problems found."""
from __future__ import annotations

import click

from rocketstore_spark.codec import broker_conf
from rocketstore_spark.rocketmq.releases import FAMILY_NAMES
from rocketstore_spark.store import multipath
from rocketstore_spark.store.discovery import StoreLayout, discover

PROBLEMS = 3            # exit status: problems found, data at risk, or nothing matched

broker_conf_option = click.option("--broker-conf", type=click.Path(exists=True, dir_okay=False),
                                  help="the broker's properties file (broker.conf)")
version_option = click.option("--rocketmq-version", help="the broker's release, e.g. 4.9.8 or 5.5.1 (default: "
                                                         "detected from the store)")
json_option = click.option("--json", "as_json", is_flag=True, help="one JSON document on stdout")
work_dir_option = click.option("--work-dir", type=click.Path(exists=True, file_okay=False),
                               help="where the queue check spills each message's queue entry (36 bytes a "
                                    "message, removed afterwards; never inside a store; a tmpfs /tmp holds them "
                                    "in memory) [default: TMPDIR]")
findings_limit_option = click.option("--limit", default=40, show_default=True,
                                     help="findings printed per store (--json has all)")
family_option = click.option("--release-family", type=click.Choice(FAMILY_NAMES),
                             help="mirror this family's recovery regardless of the release")


def _note_commitlog_paths(ctx, _param, value):
    ctx.meta["commitlog_dirs"] = [d for v in value for d in multipath.split(v)]


commitlog_path_option = click.option(
    "--commitlog-path", multiple=True, expose_value=False, callback=_note_commitlog_paths,
    help="a directory of the store's CommitLog (repeat it, or comma-separate: a multi-path CommitLog, "
         "storePathCommitLog; default: commitlog/ under the store, or broker.conf's storePathCommitLog)")


def settings_options(command):
    """--broker-conf, --rocketmq-version and --commitlog-path, the settings a command resolves the store's with."""
    return broker_conf_option(version_option(commitlog_path_option(command)))


def commitlog_dirs() -> list[str]:
    """The CommitLog directories given with --commitlog-path to the running command (none: not given)."""
    ctx = click.get_current_context(silent=True)
    return list(ctx.meta.get("commitlog_dirs") or ()) if ctx is not None else []


def given_settings(rocketmq_version: str | None) -> dict:
    """The settings given on the command line (``rocketmq.settings.resolve``'s ``options``)."""
    dirs = commitlog_dirs()
    return {"rocketmqVersion": rocketmq_version} | ({multipath.STORE_PATH: dirs} if dirs else {})


def layouts(stores) -> list[StoreLayout]:
    """Every store found under each path given (``store.discovery.discover``), in order: its CommitLog over
    the directories given with --commitlog-path, or a multi-path one broker.conf (--broker-conf) names."""
    found = [layout for path in stores for layout in discover(path, commitlog_dirs() or None)]
    ctx = click.get_current_context(silent=True)
    conf = ctx.params.get("broker_conf") if ctx is not None else None
    if conf:
        with open(conf, encoding="utf-8", errors="replace") as f:
            properties = broker_conf.parse_properties(f.read())
        for layout in found:
            layout.note_broker_conf(properties)
    return found
