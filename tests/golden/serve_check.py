#!/usr/bin/env python3
"""Ask real RocketMQ about a store: its answers from a store's ConsumeQueues and IndexFiles, and its own rebuild
of them with any settings (runs on the developer's machine or in the slow tests, not in Spark).

    python tests/golden/serve_check.py serve --version 5.5.1 --store DIR --queries QUERIES.json [--out FILE]
        [--setting maxHashSlotNum=7 ...]
    python tests/golden/serve_check.py rebuild --version 4.9.8 --store DIR --keep OUT [--out FILE]
        [--setting mappedFileSizeConsumeQueue=333 ...]

``serve`` starts RocketMQ's DefaultMessageStore on a copy of DIR (load, start, dispatch caught up) and answers
the queries of QUERIES.json with RocketMQ's own API: getMessage, queryMessage, getMin/MaxOffsetInQueue (the
generator's ``serve-check`` command: tests/golden/generator/.../ServeCheck.java has the query format).
``rebuild`` lets RocketMQ rebuild ``consumequeue/`` and ``index/`` of a copy of DIR from its CommitLog (both
emptied, started, dispatch caught up, clean shutdown; the generator's ``rebuild`` command, the same run that made
``expected-rebuild/``) and copies them to OUT. Settings (``mappedFileSizeCommitLog``, ``mappedFileSizeConsumeQueue``,
``maxHashSlotNum``, ``maxIndexNum``, ``messageDelayLevel``) default to the golden geometry; the store is quiet:
4.x's ScheduleMessageService delivers nothing, so the CommitLog stays as it is.

The generator is built for a version once (``regenerate.build``, cached under tests/golden/generator/target/,
rebuilt when a source is newer). Needs a JDK 17 and Maven, like regenerate.py.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__:
    from . import regenerate
else:                                   # run as a script: tests/golden/ is on sys.path
    import regenerate

SETTINGS = ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum",
            "messageDelayLevel")


def classpath(version: str, timers: bool = False, rocksdb: bool = False) -> str:
    """The generator's runtime classpath for RocketMQ ``version`` (``timers``: with TimerGolden, pom profile
    "timers"; ``rocksdb``: with the 5.5-only classes, profile "rocksdb"), built first when missing or older than a
    source file (``regenerate.build``)."""
    regenerate.require_tools()
    return regenerate.build(version, timers=timers, rocksdb=rocksdb)


def settings_args(settings: dict | None, any_setting: bool = False) -> list[str]:
    """Generator arguments for store ``settings``; with ``any_setting`` a name outside SETTINGS is passed as
    ``--setting name=value`` (any MessageStoreConfig setter of the release; the generator fails on one it
    lacks), else it is refused."""
    args = []
    for name, value in (settings or {}).items():
        if name in SETTINGS:
            args += [f"--{name}", str(value)]
        elif any_setting:
            args += ["--setting", f"{name}={str(value).lower() if isinstance(value, bool) else value}"]
        else:
            raise ValueError(f"unknown store setting {name!r}: one of {', '.join(SETTINGS)}")
    return args


def generator(version: str, *args: str, timeout: float = 600) -> None:
    with regenerate.java(classpath(version), "io.rocketstore.golden.Generator", *args) as cmd:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise regenerate.GoldenError(f"generator {' '.join(args)} failed for RocketMQ {version} "
                                     f"(exit {proc.returncode}):\n{proc.stderr[-4000:]}")


def serve(version: str, store: str | os.PathLike, queries: list[dict], settings: dict | None = None,
          in_place: bool = False) -> dict:
    """RocketMQ ``version``'s answers to ``queries`` from ``store`` (ServeCheck.java: the query and answer format).
    The store is copied first unless ``in_place`` (RocketMQ writes to a store it runs on)."""
    with tempfile.TemporaryDirectory(prefix="serve-check-") as scratch:
        scratch = Path(scratch)
        target = Path(store)
        if not in_place:
            target = scratch / "store"
            shutil.copytree(store, target)
        (scratch / "queries.json").write_text(json.dumps(queries))
        generator(version, "serve-check", "--store", str(target), "--queries", str(scratch / "queries.json"),
                  "--out", str(scratch / "answers.json"), *settings_args(settings))
        return json.loads((scratch / "answers.json").read_text())


def rocketmq_rebuild(version: str, store: str | os.PathLike, keep: str | os.PathLike,
                     settings: dict | None = None) -> dict:
    """RocketMQ ``version`` rebuilds ``consumequeue/`` and ``index/`` of a copy of ``store`` from its CommitLog
    with ``settings``; they are copied to ``keep``. Returns the generator's report (queues, files)."""
    with tempfile.TemporaryDirectory(prefix="rmq-rebuild-") as scratch:
        scratch = Path(scratch)
        generator(version, "rebuild", "--store", str(store), "--work", str(scratch / "work"), "--keep", str(keep),
                  "--out", str(scratch / "rebuild.json"), *settings_args(settings))
        return json.loads((scratch / "rebuild.json").read_text())


def rocketmq_recover(version: str, store: str | os.PathLike, settings: dict | None = None) -> dict:
    """RocketMQ ``version``'s real recovery of a copy of ``store`` with any store ``settings`` (the generator's
    ``recover``, as for the manifests' ``recovery``: load, start, dispatch caught up, shutdown): files deleted,
    the CommitLog bounds, every queue's bounds, the records dispatched during load."""
    with tempfile.TemporaryDirectory(prefix="rmq-recover-") as scratch:
        scratch = Path(scratch)
        generator(version, "recover", "--store", str(store), "--work", str(scratch / "work"),
                  "--out", str(scratch / "recover.json"), *settings_args(settings, any_setting=True))
        return json.loads((scratch / "recover.json").read_text())


def batchcq_view(store: str | os.PathLike, version: str = "5.5.1") -> dict:
    """RocketMQ ``version``'s view of a BatchCQ store (BatchCQGolden view, as for the batchcq-5.5.1 manifests): its
    batchconsumequeue/ units, its restart on a copy (``recovery``: files deleted, every queue's min and max offset
    and units) and its rebuild; ``store_log``: what RocketMQ's store logger wrote meanwhile (its logback files go
    under ``user.home``, here the scratch directory: ``DefaultMessageStore.load`` logs the exception it turns into
    ``loaded`` false there)."""
    with tempfile.TemporaryDirectory(prefix="rmq-batchcq-") as scratch:
        scratch = Path(scratch)
        with regenerate.java(classpath(version, rocksdb=True), "io.rocketstore.golden.BatchCQGolden", "view",
                             "--store", str(store), "--work", str(scratch / "work"), "--out", str(scratch / "view.json"),
                             options=(f"-Duser.home={scratch}",)) as cmd:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise regenerate.GoldenError(f"BatchCQGolden view failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        view = json.loads((scratch / "view.json").read_text())
        log = scratch / "logs" / "rocketmqlogs" / "store.log"
        view["store_log"] = log.read_text(errors="replace") if log.is_file() else ""
        return view


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("serve", "rebuild"))
    parser.add_argument("--version", required=True, help="RocketMQ version (Maven Central)")
    parser.add_argument("--store", required=True, type=Path)
    parser.add_argument("--queries", type=Path, help="serve: JSON list of queries")
    parser.add_argument("--keep", type=Path, help="rebuild: where RocketMQ's consumequeue/ and index/ go")
    parser.add_argument("--out", type=Path, help="the answers / report as JSON (default: stdout)")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                        help=f"store setting: {', '.join(SETTINGS)}")
    args = parser.parse_args(argv)
    settings = dict(s.split("=", 1) for s in args.setting)
    try:
        if args.command == "serve":
            if args.queries is None:
                parser.error("serve needs --queries")
            result = serve(args.version, args.store, json.loads(args.queries.read_text()), settings)
        else:
            if args.keep is None:
                parser.error("rebuild needs --keep")
            result = rocketmq_rebuild(args.version, args.store, args.keep, settings)
    except (regenerate.GoldenError, ValueError) as e:
        print(f"serve_check: {e}", file=sys.stderr)
        return 1
    text = json.dumps(result, indent=1, ensure_ascii=False) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
