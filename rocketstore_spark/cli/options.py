"""What the ``rocketstore`` commands share (CLI, in-process): the options several take, the settings they
pass on, the stores named on the command line, and the exit status for problems found."""
from __future__ import annotations

import click

from rocketstore_spark.rocketmq.releases import FAMILY_NAMES
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


def settings_options(command):
    """--broker-conf and --rocketmq-version, the settings a command resolves the store's with."""
    return broker_conf_option(version_option(command))


def given_settings(rocketmq_version: str | None) -> dict:
    """The settings given on the command line (``rocketmq.settings.resolve``'s ``options``)."""
    return {"rocketmqVersion": rocketmq_version}


def layouts(stores) -> list[StoreLayout]:
    """Every store found under each path given (``store.discovery.discover``), in order."""
    return [layout for path in stores for layout in discover(path)]
