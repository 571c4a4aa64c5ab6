#!/usr/bin/env python3
"""Regenerate the golden RocketMQ stores and their manifests (runs on the developer's machine, not in Spark).

    python tests/golden/regenerate.py                      # every version, into tests/golden/
    python tests/golden/regenerate.py --versions 5.5.1 --out /tmp/golden
    python tests/golden/regenerate.py --config-only        # only the config files, into the existing stores
    python tests/golden/regenerate.py --jobs 2 --out /tmp/golden   # two versions at a time (what the test runs)
    python tests/golden/regenerate.py --multipath --out /tmp/golden   # only the multi-path CommitLog stores
    python tests/golden/regenerate.py --dledger --out /tmp/golden  # only the DLedger CommitLog stores (dledger-5.5.1/)
    python tests/golden/regenerate.py --rocksdb --out /tmp/golden  # only rocksdb-5.5.1/ (storeType=defaultRocksDB)
    python tests/golden/regenerate.py --rocksdb-config --out /tmp/golden  # only rocksdb-5.5.1/config-v*/ (RocksDB config v1, v2)
    python tests/golden/regenerate.py --batchcq --out /tmp/golden  # only batchcq-5.5.1/ (queue.type=BatchCQ, inner batches)
    python tests/golden/regenerate.py --timers --out /tmp/golden   # only timers-5.5.1/ (TimerMessageStore)
    python tests/golden/regenerate.py --lmq --out /tmp/golden      # only lmq-5.5.1/ (enableLmq + enableMultiDispatch)

For each RocketMQ version this builds tests/golden/generator against that version's rocketmq-store from
Maven Central, lets RocketMQ's own DefaultMessageStore write the stores, applies the byte surgery of the
damaged scenarios, and records RocketMQ's view of every store (its own decoding of every record, and the
outcome of its real recovery run on a copy) in ``<version>/<scenario>/manifest.json``. Last, the broker's
other config files (topics.json, subscriptionGroup.json, 5.x delayOffset.json) are added to the
consumer-offsets store, with what RocketMQ was given in ``config-manifest.json`` next to its manifest; this
step touches nothing the manifest describes, so ``--config-only`` can redo it on existing stores in seconds.

Only the standard library is used: the ground truth must not depend on the codecs it is meant to check.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
GENERATOR = HERE / "generator"
DEFAULT_VERSIONS = ("4.9.8", "5.1.4", "5.3.3", "5.5.1")
JVM_OPTS = [
    # RocketMQ unmaps files through JDK internals
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
]

#: Fields that differ on every regeneration: tests compare these for consistency, never for equality
#: with a fresh run.
NOT_REPRODUCIBLE = {
    "born_timestamp": "producer wall clock at generation time",
    "store_timestamp": "broker wall clock inside RocketMQ's put lock",
    "born_host_address/born_host_port": "randomised per message by the generator (seeded, but see UNIQ_KEY)",
    "UNIQ_KEY / uniq_key / msg_id of retried copies": "MessageClientIDSetter uses the machine IP, the PID and the clock",
    "index file names": "yyyyMMddHHmmssSSS of the wall clock when RocketMQ created the file",
    "checkpoint": "timestamps of RocketMQ's flush services",
    "physical and queue offsets": "depend on property lengths (UNIQ_KEY, timestamps in delay tags) and on which "
                                  "delay levels RocketMQ 4.9.8's ScheduleMessageService delivered during the run",
    "crash window": "how many records landed after the last checkpoint flush depends on thread scheduling",
}

GEOMETRY = {
    "mapped_file_size_commitlog": 128 * 1024,
    "mapped_file_size_consume_queue": 25 * 20,
    "max_hash_slot_num": 64,
    "max_index_num": 256,
    "message_delay_level": "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
}

BLANK_MAGIC = -875286124

#: the scenario whose store also gets the broker's other config files (the README examples read it)
CONFIG_SCENARIO = "consumer-offsets"
CONFIG_MANIFEST = "config-manifest.json"


class GoldenError(RuntimeError):
    """A failure the user can act on (missing tool, unknown version, RocketMQ refusing a command)."""


# ------------------------------------------------------------------------------------------- tools

def require_tools() -> None:
    for tool, hint in (("java", "a JDK 17 (apt-get install openjdk-17-jdk-headless)"),
                       ("mvn", "Maven (apt-get install maven)")):
        if shutil.which(tool) is None:
            raise GoldenError(f"'{tool}' not found on PATH: the golden generator needs {hint}")


def build(version: str, rocksdb: bool = False, timers: bool = False) -> str:
    """Compile the generator against rocketmq-store ``version`` (``rocksdb``: with RocksDBGolden and the
    rocketmq-broker jar, pom profile "rocksdb"; ``timers``: with TimerGolden, pom profile "timers");
    returns the runtime classpath. A build under tests/golden/generator/target/ newer than the pom and every
    source is used as it is (a slow test may have built it already in this run: Maven takes 10-25 s a build);
    one Maven build at a time, across processes too (a lock file under target/: Maven's local repository is not
    safe for concurrent downloads, and the tests run regenerations beside serve_check's builds)."""
    target = GENERATOR / "target"
    target.mkdir(exist_ok=True)
    built = target / (f"{version}-rocksdb" if rocksdb else f"{version}-timers" if timers else version)
    stamp = built / "classpath.txt"
    sources = [GENERATOR / "pom.xml", *(GENERATOR / "src").rglob("*.java")]
    with open(target / ".maven.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fresh = stamp.exists() and (built / "classes").is_dir() and \
            stamp.stat().st_mtime >= max(p.stat().st_mtime for p in sources)
        if not fresh:
            maven_build(version, rocksdb, timers)
            stamp.touch()
    return f"{built / 'classes'}{os.pathsep}{stamp.read_text().strip()}"


def maven_build(version: str, rocksdb: bool, timers: bool) -> None:
    """mvn package dependency:build-classpath for ``build``; a version Maven Central lacks is a GoldenError."""
    cmd = ["mvn", "-q", "-B", f"-Drocketmq.version={version}", *(["-Drocksdb"] if rocksdb else []),
           *(["-Dtimers"] if timers else []), "package", "dependency:build-classpath"]
    proc = subprocess.run(cmd, cwd=GENERATOR, capture_output=True, text=True)
    if proc.returncode != 0:
        out = proc.stdout + proc.stderr
        if "Could not resolve" in out or "could not be resolved" in out or "was not found" in out:
            raise GoldenError(f"RocketMQ {version} could not be resolved from Maven Central "
                              f"(org.apache.rocketmq:rocketmq-store:{version}). Is it a released version?\n{out[-2000:]}")
        raise GoldenError(f"building the generator for RocketMQ {version} failed:\n{out[-4000:]}")


#: at most this many generator JVMs at once (main sets it from --jobs; None: no limit). Most of a JVM run is
#: start-up, RocketMQ's own waits (the 5.x shutdown sleeps 3 s, the cleaner starts a minute in) and the
#: writer's pauses, so on two cores more runs than cores keep both busy.
JVM_SLOTS: threading.Semaphore | None = None


@contextlib.contextmanager
def java(classpath: str, main: str, *args: str, options: tuple[str, ...] = ()):
    """The command line of a JVM running ``main``, with a ``java.io.tmpdir`` of its own that is removed when the
    block ends. Why: RocksDB's JNI library is unpacked there (13 MB) once per JVM and deleted at a normal exit
    only; a generator halted on purpose (a crash golden: ``Runtime.halt``) left one in /tmp each time."""
    with tempfile.TemporaryDirectory(prefix="golden-jvm-") as tmp:
        yield ["java", *JVM_OPTS, f"-Djava.io.tmpdir={tmp}", *options, "-cp", classpath, main, *args]


def run(classpath: str, *args: str, main: str = "io.rocketstore.golden.Generator") -> None:
    with JVM_SLOTS or contextlib.nullcontext(), java(classpath, main, *args) as cmd:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("[golden]")]
    for ln in lines:
        print("   ", ln, file=sys.stderr)
    if proc.returncode != 0:
        raise GoldenError(f"generator {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")


# ---------------------------------------------------------------------------------- byte surgery
# Every damaged store is a copy of a RocketMQ-written one changed by exactly the edits listed here;
# each edit is recorded in the manifest's "surgery" list.

def record_body_position(msg: dict) -> int:
    """File position of the first body byte (layout: 88 bytes of header for IPv4 hosts, +12 per IPv6 host)."""
    extra = (12 if msg["sys_flag"] & 0x10 else 0) + (12 if msg["sys_flag"] & 0x20 else 0)
    return msg["file_position"] + 88 + extra


def flip_byte(path: Path, position: int) -> int:
    """Invert the byte at ``position`` of the file; returns its old value."""
    with open(path, "r+b") as f:
        f.seek(position)
        old = f.read(1)[0]
        f.seek(position)
        f.write(bytes([old ^ 0xFF]))
    return old


def flip_body_byte(store: Path, msg: dict) -> dict:
    seg = store / "commitlog" / msg["segment"]
    position = record_body_position(msg) + msg["body_length"] // 2
    old = flip_byte(seg, position)
    return {"action": "flip_body_byte", "file": f"commitlog/{msg['segment']}", "file_position": position,
            "physical_offset": msg["physical_offset"], "old": old, "new": old ^ 0xFF}


def zero_range(segment: Path, position: int, length: int) -> dict:
    """Zero ``length`` bytes of a CommitLog segment at ``position``; returns the manifest's surgery entry."""
    with open(segment, "r+b") as f:
        f.seek(position)
        f.write(bytes(length))
    return {"action": "zero_range", "file": f"commitlog/{segment.name}", "file_position": position, "length": length}


def tear_record(store: Path, msg: dict) -> dict:
    """Zero the second half of a record, as a write torn by power loss leaves it."""
    seg = store / "commitlog" / msg["segment"]
    start = msg["file_position"] + msg["total_size"] // 2
    end = msg["file_position"] + msg["total_size"]
    with open(seg, "r+b") as f:
        f.seek(start)
        f.write(bytes(end - start))
    return {"action": "zero_range", "file": f"commitlog/{msg['segment']}", "file_position": start, "length": end - start,
            "physical_offset": msg["physical_offset"]}


def zero_page(store: Path, segment: dict, messages: list[dict], page: int = 4096) -> dict:
    """Zero an OS page in the middle of a segment's valid data, as a dirty page lost by a power cut leaves it:
    the first page from the middle on in which a record starts (so headers are lost, not only a body)."""
    starts = [m["file_position"] for m in messages if m["segment"] == segment["file"]]
    position = segment["valid_end"] // 2 // page * page
    while not any(position < s < position + page for s in starts):
        position += page
    with open(store / "commitlog" / segment["file"], "r+b") as f:
        f.seek(position)
        f.write(bytes(page))
    return {"action": "zero_page", "file": f"commitlog/{segment['file']}", "file_position": position, "length": page,
            "physical_offset": segment["base_offset"] + position}


def cut_consume_queue(store: Path, topic: str, queue_id: int, entries: int) -> dict:
    """Zero the last ``entries`` written entries of a queue, deleting a file they leave empty."""
    qdir = store / "consumequeue" / topic / str(queue_id)
    files = sorted(qdir.iterdir())
    last = files[-1]
    data = bytearray(last.read_bytes())
    written = 0
    while written * 20 + 20 <= len(data) and any(data[written * 20: written * 20 + 20]):
        written += 1
    entries = min(entries, written)
    if entries == written and len(files) > 1:
        last.unlink()
        return {"action": "delete_file", "file": str(last.relative_to(store)), "entries_removed": written}
    data[(written - entries) * 20: written * 20] = bytes(entries * 20)
    last.write_bytes(bytes(data))
    return {"action": "zero_cq_entries", "file": str(last.relative_to(store)),
            "file_position": (written - entries) * 20, "entries_removed": entries}


def newest_index(store: Path) -> Path:
    return sorted((store / "index").iterdir())[-1]


# ------------------------------------------------------------------------------------- scenarios

class VersionRun:
    """Generates every scenario for one RocketMQ version under ``out/rocketmq-<version>/``."""

    def __init__(self, version: str, out: Path, scratch: Path):
        self.version = version
        self.v5 = version.split(".")[0] != "4"
        self.root = out / f"rocketmq-{version}"
        self.scratch = scratch / version
        self.classpath = ""

    def store(self, scenario: str) -> Path:
        return self.root / scenario / "store"

    def gen(self, *args: str) -> None:
        run(self.classpath, *args)

    def has_prop_crc(self) -> bool:
        """Whether this release's MessageStoreConfig has enabledAppendPropCRC (5.1.4 has not): the propcrc
        scenario is written only where it exists."""
        jar = next((p for p in self.classpath.split(os.pathsep) if "rocketmq-store" in os.path.basename(p)), None)
        if jar is None:
            return True
        with zipfile.ZipFile(jar) as z:
            data = z.read("org/apache/rocketmq/store/config/MessageStoreConfig.class")
        found = b"setEnabledAppendPropCRC" in data
        if not found:
            print(f"== RocketMQ {self.version}: no enabledAppendPropCRC, no propcrc scenario", file=sys.stderr)
        return found

    def inspect(self, store: Path, scratch: Path | None = None) -> dict:
        """RocketMQ's decoding of ``store`` (``scratch``: a directory of this run's own, default the version's)."""
        out = (scratch or self.scratch) / "inspect.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        self.gen("inspect", "--store", str(store), "--out", str(out))
        return json.loads(out.read_text())

    def recover(self, store: Path, keep: Path | None, rebuild: bool = False, scratch: Path | None = None) -> dict:
        scratch = scratch or self.scratch
        out = scratch / "recover.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        args = ["recover", "--store", str(store), "--work", str(scratch / "work"), "--out", str(out)]
        if keep is not None:
            args += ["--keep", str(keep)]
        if rebuild:
            args.append("--rebuild")
        self.gen(*args)
        return json.loads(out.read_text())

    def copy(self, src: str, dst: str) -> Path:
        target = self.store(dst)
        shutil.copytree(self.store(src), target, symlinks=False)
        return target

    def build(self) -> None:
        print(f"== RocketMQ {self.version}: building the generator", file=sys.stderr)
        self.classpath = build(self.version)

    def generate(self) -> list[str]:
        if self.root.exists():
            shutil.rmtree(self.root)
        self.scratch.mkdir(parents=True, exist_ok=True)
        if not self.classpath:
            self.build()

        # Each scenario's manifest (RocketMQ's inspect and recovery runs on it) starts as soon as its store is
        # final, alongside the writes of the next stores: a manifest only reads its store (recovery runs on a
        # copy) and writes under its own scenario folder and scratch directory.
        with ThreadPoolExecutor(max_workers=16) as later:
            scenarios = self.write_stores(later)
            print(f"== RocketMQ {self.version}: manifests", file=sys.stderr)
            for future in [spec["manifest"] for spec in scenarios.values()]:
                future.result()
        self.write_config()
        shutil.rmtree(self.scratch, ignore_errors=True)
        return list(scenarios)

    def write_stores(self, later: ThreadPoolExecutor) -> dict[str, dict]:
        """Every scenario's store, each manifest submitted to ``later`` once its store is final (in the spec's
        "manifest"); returns the scenarios in order."""
        scenarios: dict[str, dict] = {}

        def add(name: str, description: str, surgery=(), keep_recovery=False, rebuild=False, parent=None,
                after=None):
            """Scenario ``name``, its store final (``after``: once that future is done)."""
            spec = dict(description=description, surgery=list(surgery), keep_recovery=keep_recovery,
                        rebuild=rebuild, parent=parent)
            scenarios[name] = spec
            spec["manifest"] = later.submit(self.write_manifest, name, spec, after)

        print(f"== RocketMQ {self.version}: writing stores", file=sys.stderr)
        self.gen("write", "--store", str(self.store("clean")), "--mode", "clean")
        add("clean", "Written by DefaultMessageStore, then shut down normally.", rebuild=True)

        self.gen("write", "--store", str(self.store("crash")), "--mode", "crash")
        add("crash", "Written and dispatched, then the JVM halted without shutdown (abort file left, "
                     "checkpoint as RocketMQ last flushed it).", keep_recovery=True)
        crash_view = self.inspect(self.store("crash"))
        crash_msgs = crash_view["messages"]

        # torn tail: the last record RocketMQ wrote, cut mid-way
        torn = self.copy("crash", "torn-tail")
        last = max(crash_msgs, key=lambda m: m["physical_offset"])
        add("torn-tail", "The crash store with the second half of its last record zeroed (a torn write).",
            [tear_record(torn, last)], keep_recovery=True, parent="crash")

        # corrupt body: one record inside the recovery window (last segment) and one in the oldest segment
        corrupt = self.copy("crash", "corrupt-body")
        plain = [m for m in crash_msgs if m["body_length"] >= 8 and not m["sys_flag"] & 0x30]
        last_seg = max(m["segment"] for m in plain)
        first_seg = min(m["segment"] for m in plain)
        in_window = [m for m in plain if m["segment"] == last_seg]
        victim_new = in_window[len(in_window) // 2]
        victim_old = [m for m in plain if m["segment"] == first_seg][10]
        add("corrupt-body", "The crash store with one body byte flipped in a record of the newest segment "
                            "(inside the recovery window) and one in the oldest segment.",
            [flip_body_byte(corrupt, victim_new), flip_body_byte(corrupt, victim_old)],
            keep_recovery=True, parent="crash")

        self.zeroed_page_scenario(add, crash_view)
        self.stale_scenarios(add)

        # lagging ConsumeQueues, from a clean and from a crashed store
        for parent in ("clean", "crash"):
            lag = self.copy(parent, f"cq-lag-{parent}")
            edits = [cut_consume_queue(lag, "TopicTest", q, 3 + q) for q in range(4)]
            edits.append(cut_consume_queue(lag, "OrderTopic", 0, 100))
            add(f"cq-lag-{parent}", f"The {parent} store with ConsumeQueues cut back by some entries, as if "
                                    "dispatch had lagged (TopicTest 0-3 by 3-6 entries, OrderTopic/0's last file removed).",
                edits, keep_recovery=True, parent=parent)

        # index lost: newest IndexFile deleted, or truncated
        gone = self.copy("clean", "index-deleted")
        victim = newest_index(gone)
        victim.unlink()
        add("index-deleted", "The clean store with its newest IndexFile deleted.",
            [{"action": "delete_file", "file": str(victim.relative_to(gone))}], keep_recovery=True, parent="clean")
        cut = self.copy("clean", "index-truncated")
        victim = newest_index(cut)
        size = victim.stat().st_size
        with open(victim, "r+b") as f:
            f.truncate(size // 2)
        add("index-truncated", "The clean store with its newest IndexFile truncated to half its length.",
            [{"action": "truncate_file", "file": str(victim.relative_to(cut)), "old_size": size, "new_size": size // 2}],
            keep_recovery=True, parent="clean")

        # consumer offsets, over a store whose oldest segment RocketMQ's own cleaner expired (its first run is a
        # minute after start-up: the other stores are written meanwhile)
        offsets_store = self.copy("clean", "consumer-offsets")

        def expire_and_offsets() -> None:
            self.gen("expire", "--store", str(offsets_store))
            view = self.recover(offsets_store, keep=None, scratch=self.scratch / "expire")
            self.gen("offsets", "--store", str(offsets_store), *self.offset_args(view))

        add("consumer-offsets", "The clean store after RocketMQ's cleaner expired the oldest CommitLog segment "
                                "(queue minimums moved), with config/consumerOffset.json (+ .bak) persisted by "
                                "RocketMQ's ConfigManager: groups inside the range, caught up, beyond max, below min, "
                                "and for a topic that does not exist.", parent="clean",
            after=later.submit(expire_and_offsets))

        if self.v5 and self.has_prop_crc():
            self.gen("write", "--store", str(self.store("propcrc")), "--mode", "propcrc")
            add("propcrc", "Written with enabledAppendPropCRC=true (every record ends with the __CRC32# "
                           "property), then shut down normally.", rebuild=True)
        return scenarios

    def zeroed_page_scenario(self, add, crash_view: dict) -> None:
        """zeroed-page: a lost dirty page, one 4 KiB page in the middle of the crash store's last segment zeroed."""
        zeroed = self.copy("crash", "zeroed-page")
        last_data = max((s for s in crash_view["segments"] if s["records"]), key=lambda s: s["base_offset"])
        add("zeroed-page", "The crash store with a 4 KiB page in the middle of its last segment's data zeroed "
                           "(a dirty page lost by a power cut): the first page from the middle on in which a "
                           "record starts.",
            [zero_page(zeroed, last_data, crash_view["messages"])], keep_recovery=True, parent="crash")

    def stale_scenarios(self, add) -> None:
        """crash-stale: its own write run (880 messages, thorough flushes off for the last 510), so the checkpoint
        lags the crash by three or more segments; corrupt-window: a copy with one body byte flipped in the segment
        before the last one with records (inside every family's recovery window, not the last segment)."""
        self.gen("write", "--store", str(self.store("crash-stale")), "--mode", "stale")
        add("crash-stale", "Written (880 messages), the checkpoint's last thorough flush after message 370, then "
                           "510 more messages and the JVM halted: the checkpoint lags the log by three or more "
                           "segments.", keep_recovery=True)
        stale_msgs = self.inspect(self.store("crash-stale"))["messages"]
        window = self.copy("crash-stale", "corrupt-window")
        plain = [m for m in stale_msgs if m["body_length"] >= 8 and not m["sys_flag"] & 0x30]
        segs = sorted({m["segment"] for m in plain})
        victim = [m for m in plain if m["segment"] == segs[-2]][2]
        add("corrupt-window", "The crash-stale store with one body byte flipped in an early record of the segment "
                              "before the last (inside every family's recovery window, not in the last segment).",
            [flip_body_byte(window, victim)], keep_recovery=True, parent="crash-stale")

    def config_only(self) -> list[str]:
        """Only the config step, on the existing consumer-offsets store (no store phases, manifests untouched)."""
        if not (self.root / CONFIG_SCENARIO / "manifest.json").exists():
            raise GoldenError(f"{self.root / CONFIG_SCENARIO} has no manifest: regenerate without --config-only first")
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.build()
        self.write_config()
        shutil.rmtree(self.scratch, ignore_errors=True)
        return [CONFIG_SCENARIO]

    def config_files(self) -> list[str]:
        """The config files the config step writes (4.9.8's delayOffset.json is RocketMQ's own, from the store run)."""
        names = ["topics.json", "subscriptionGroup.json"] + (["delayOffset.json"] if self.v5 else [])
        return [f"config/{n}{suffix}" for n in names for suffix in ("", ".bak")]

    def write_config(self) -> None:
        """config/topics.json and subscriptionGroup.json (+ .bak; 5.x also delayOffset.json, whose service lives
        in the broker there) written through RocketMQ's classes into the consumer-offsets store, and
        config-manifest.json: what RocketMQ was given (tests/golden/README.md)."""
        scenario_dir = self.root / CONFIG_SCENARIO
        store = scenario_dir / "store"
        manifest = json.loads((scenario_dir / "manifest.json").read_text())
        for rel in self.config_files():
            (store / rel).unlink(missing_ok=True)
        out = self.scratch / "config.json"
        delay = [f"{q['queue_id'] + 1}={q['max_offset']}" for q in manifest["queues"]
                 if q["topic"] == "SCHEDULE_TOPIC_XXXX"] if self.v5 else []
        self.gen("config", "--store", str(store), "--out", str(out), *(a for d in delay for a in ("--delay", d)))
        given = json.loads(out.read_text())
        doc = {
            "scenario": CONFIG_SCENARIO,
            "description": "The broker's config files next to consumerOffset.json, each persisted twice through "
                           "RocketMQ's ConfigManager (the .bak holds the first state: system entries only). "
                           "'current' and 'bak' are what RocketMQ was given (4.9.8 delay offsets: what its own "
                           "ScheduleMessageService wrote, as RocketMQ reads the file back).",
            "rocketmq_version": self.version,
            "not_reproducible": {"dataVersion": "timestamp of the generator's clock"},
            "files": [{"path": rel, "size": (store / rel).stat().st_size,
                       "sha256": hashlib.sha256((store / rel).read_bytes()).hexdigest()} for rel in self.config_files()],
            **given,
        }
        (scenario_dir / CONFIG_MANIFEST).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        print(f"   {CONFIG_SCENARIO}: {len(doc['files'])} config files, {len(given['topics']['current'])} topics, "
              f"{len(given['subscription_groups']['current']['groups'])} groups", file=sys.stderr)

    @staticmethod
    def offset_args(view: dict) -> list[str]:
        queues = {(q["topic"], q["queue_id"]): q for q in view["queues"]}
        args: list[str] = []

        def put(topic: str, group: str, queue_id: int, offset: int) -> None:
            args.extend(["--set", f"{topic}@{group}/{queue_id}={offset}"])

        for q in range(4):
            lo, hi = queues[("TopicTest", q)]["min_offset"], queues[("TopicTest", q)]["max_offset"]
            put("TopicTest", "golden_in_range", q, (lo + hi) // 2)
            put("TopicTest", "golden_below_min", q, max(lo - 3, 0))
            put("TopicTest", "golden_beyond_max", q, hi + 5 + q)
        for q in range(8):
            put("OrderTopic", "golden_caught_up", q, queues[("OrderTopic", q)]["max_offset"])
        put("%RETRY%golden_group", "golden_group", 0, queues[("%RETRY%golden_group", 0)]["max_offset"] - 2)
        put("NoSuchTopic", "golden_ghost", 0, 7)
        put("NoSuchTopic", "golden_ghost", 1, 0)
        return args

    def write_manifest(self, name: str, spec: dict, after=None) -> None:
        """``name``'s manifest.json (``after``: a future its store waits for); scratch files under its own name."""
        if after is not None:
            after.result()
        store = self.store(name)
        scenario_dir = store.parent
        scratch = self.scratch / "scenarios" / name
        inspected = self.inspect(store, scratch)
        keep = scenario_dir / "expected-recovery" if spec["keep_recovery"] else None
        recovery = self.recover(store, keep, scratch=scratch)
        manifest = {
            "scenario": name,
            "description": spec["description"],
            "derived_from": spec["parent"],
            "rocketmq_version": self.version,
            "rocketmq_version_reported": inspected["rocketmq_version"],
            "store": "store",
            "geometry": GEOMETRY,
            "surgery": spec["surgery"],
            "not_reproducible": NOT_REPRODUCIBLE,
            "abort_present": inspected["abort_present"],
            "checkpoint": inspected["checkpoint"],
            "checkpoint_file_head": checkpoint_head(store),
            "segments": inspected["segments"],
            "files": inspected["files"],
            "commitlog": {"min_offset": recovery.get("commitlog_min_offset"),
                          "max_offset": recovery.get("commitlog_max_offset")},
            "queues": recovery.get("queues"),
            "recovery": {k: v for k, v in recovery.items() if k not in ("files_after", "queues", "rocketmq_version")},
            "expected": {},
            "messages": inspected["messages"],
        }
        manifest["recovery"]["files_after"] = recovery["files_after"]
        if keep is not None:
            manifest["expected"]["recovery"] = "expected-recovery"
        if spec["rebuild"]:
            rebuild = self.recover(store, scenario_dir / "expected-rebuild", rebuild=True, scratch=scratch)
            manifest["expected"]["rebuild"] = "expected-rebuild"
            manifest["rebuild"] = {k: v for k, v in rebuild.items() if k not in ("rocketmq_version",)}
        (scenario_dir / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        print(f"   {name}: {len(manifest['messages'])} records, recovery max offset "
              f"{manifest['commitlog']['max_offset']}", file=sys.stderr)


# ------------------------------------------------------------------------------- multi-path CommitLog

MULTIPATH_VERSION = "5.5.1"
MULTIPATH_MESSAGES = 400      # three segments: 0 and 2 in one directory, 1 (and after a crash the preallocated 3) in the other
MULTIPATH_DIRS = ("store/commitlog", "disk2/commitlog")   # storePathCommitLog, relative to the scenario folder


def multipath(out: Path, scratch: Path, version: str = MULTIPATH_VERSION) -> list[str]:
    """``multipath-<version>/{clean,crash}/``: RocketMQ's own store with ``storePathCommitLog`` over two
    directories (MultiPath.java), its view of every record and its real recovery of a copy in
    ``manifest.json``; paths in the manifest are relative to the scenario folder."""
    root = out / f"multipath-{version}"
    if root.exists():
        shutil.rmtree(root)
    print(f"== RocketMQ {version}: building the generator (multi-path)", file=sys.stderr)
    classpath = build(version)
    work = scratch / f"multipath-{version}"
    work.mkdir(parents=True, exist_ok=True)

    def gen(*args: str) -> dict | None:
        run(classpath, *args, main="io.rocketstore.golden.MultiPath")
        result = work / "out.json"
        return json.loads(result.read_text()) if "--out" in args else None

    names = []
    for mode in ("clean", "crash"):
        scenario = root / mode
        (scenario / "store").mkdir(parents=True)
        gen("write", "--scenario", str(scenario), "--mode", mode, "--messages", str(MULTIPATH_MESSAGES))
        inspected = gen("inspect", "--scenario", str(scenario), "--out", str(work / "out.json"))
        recovery = gen("recover", "--scenario", str(scenario), "--work", str(work / "copy"),
                       "--out", str(work / "out.json"))
        manifest = {
            "scenario": mode,
            "description": f"{MULTIPATH_MESSAGES} sends of the golden message mix written by DefaultMessageStore with "
                           f"storePathCommitLog={','.join(MULTIPATH_DIRS)} (MultiPathMappedFileQueue), then "
                           + ("shut down normally." if mode == "clean" else "the JVM halted without shutdown."),
            "derived_from": None,
            "rocketmq_version": version,
            "rocketmq_version_reported": inspected["rocketmq_version"],
            "store": "store",
            "store_path_commitlog": list(MULTIPATH_DIRS),
            "paths": "relative to the scenario folder",
            "geometry": GEOMETRY,
            "surgery": [],
            "not_reproducible": NOT_REPRODUCIBLE,
            "abort_present": inspected["abort_present"],
            "checkpoint": inspected["checkpoint"],
            "checkpoint_file_head": checkpoint_head(scenario / "store"),
            "segments": inspected["segments"],
            "files": inspected["files"],
            "commitlog": {"min_offset": recovery.get("commitlog_min_offset"),
                          "max_offset": recovery.get("commitlog_max_offset")},
            "queues": recovery.get("queues"),
            "recovery": {k: v for k, v in recovery.items() if k not in ("queues", "rocketmq_version")},
            "messages": inspected["messages"],
        }
        (scenario / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        print(f"   multipath {mode}: {len(manifest['messages'])} records in "
              f"{[(s['directory'], s['file']) for s in manifest['segments']]}, recovery max offset "
              f"{manifest['commitlog']['max_offset']}", file=sys.stderr)
        names.append(mode)
    return names


# ------------------------------------------------------------------------------------ DLedger stores

DLEDGER_VERSION = "5.5.1"
DLEDGER_ENTRY_HEADER = 48
DLEDGER_GEOMETRY = {**GEOMETRY, "mapped_file_size_commitlog": 64 * 1024, "dledger_index_file_size": 32 * 1024}


def flip_entry_pos(store: Path, entry: dict, data_file_size: int) -> dict:
    """Flip the low byte of an entry header's ``pos`` field (bytes 24-31 of the 48-byte header): DLedger's
    recovery checks pos against where the entry lies and stops there."""
    name = f"{entry['pos'] // data_file_size * data_file_size:020d}"
    position = entry["pos"] % data_file_size + 31
    old = flip_byte(store / "dledger-n0" / "data" / name, position)
    return {"action": "flip_entry_pos", "file": f"dledger-n0/data/{name}", "file_position": position,
            "entry_index": entry["index"], "entry_pos": entry["pos"], "old": old, "new": old ^ 0xFF}


def flip_index_term(store: Path, entry: dict, index_file_size: int) -> dict:
    """Flip the low byte of the term of an entry's index unit (bytes 24-31 of the 32-byte unit at index × 32):
    the entry stays valid, DLedger's recovery finds its unit disagreeing and rewrites the units from there."""
    at = entry["index"] * 32
    name = f"{at // index_file_size * index_file_size:020d}"
    position = at % index_file_size + 31
    old = flip_byte(store / "dledger-n0" / "index" / name, position)
    return {"action": "flip_index_term", "file": f"dledger-n0/index/{name}", "file_position": position,
            "entry_index": entry["index"], "old": old, "new": old ^ 0xFF}


def flip_record_body(store: Path, entry: dict, data_file_size: int) -> dict:
    """Flip the middle byte of the body of the CommitLog record inside an entry (layout read from the record's
    header: BODYLENGTH at 68 + host lengths): the entry stays valid for DLedger, the record's BODYCRC fails."""
    name = f"{entry['pos'] // data_file_size * data_file_size:020d}"
    record = entry["pos"] % data_file_size + DLEDGER_ENTRY_HEADER
    path = store / "dledger-n0" / "data" / name
    with open(path, "r+b") as f:
        f.seek(record)
        head = f.read(120)
        sys_flag = int.from_bytes(head[36:40], "big")
        hosts = (20 if sys_flag & 0x10 else 8) + (20 if sys_flag & 0x20 else 8)
        body_length = int.from_bytes(head[68 + hosts:72 + hosts], "big")
        position = record + 72 + hosts + body_length // 2
    old = flip_byte(path, position)
    return {"action": "flip_body_byte", "file": f"dledger-n0/data/{name}", "file_position": position,
            "entry_index": entry["index"], "physical_offset": entry["pos"] + DLEDGER_ENTRY_HEADER,
            "body_length": body_length, "old": old, "new": old ^ 0xFF}


def compact_json(doc: dict) -> str:
    """A manifest with one line per element of its long lists (messages, entries, files): a third of the size
    of an indented one, and still one change per line in a diff."""
    lines = ["{"]
    items = list(doc.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if isinstance(value, list) and len(value) > 8:
            body = ",\n  ".join(json.dumps(v, ensure_ascii=False, separators=(",", ":")) for v in value)
            lines.append(f" {json.dumps(key)}: [\n  {body}\n ]{comma}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}{comma}")
    return "\n".join(lines) + "\n}\n"


def generate_dledger(out: Path, scratch: Path, version: str = DLEDGER_VERSION) -> list[str]:
    """``dledger-<version>/``: stores written by RocketMQ's DLedgerCommitLog (Generator's dledger-write), each
    with a manifest of RocketMQ's view of it (dledger-view on a copy: recovery, getMessage of every queue,
    queryMessage, DLedger's own entries). Scenarios: clean, crash, switched (a classic store switched to DLedger),
    corrupt-entry (crash + one entry header's pos flipped in the last data file), corrupt-index (crash + one index
    unit's term flipped) and corrupt-record (clean + one record byte flipped inside a valid entry)."""
    root = out / f"dledger-{version}"
    if root.exists():
        shutil.rmtree(root)
    work = scratch / f"dledger-{version}"
    work.mkdir(parents=True, exist_ok=True)
    classpath = build(version)
    size = DLEDGER_GEOMETRY["mapped_file_size_commitlog"]
    scenarios: dict[str, dict] = {}

    def gen(*args: str) -> None:
        run(classpath, *args)

    def view(store: Path) -> dict:
        target = work / "view.json"
        gen("dledger-view", "--store", str(store), "--work", str(work / "copy"), "--out", str(target))
        return json.loads(target.read_text())

    for mode, description in (
            ("clean", "Written through DLedgerCommitLog (one-node group, self id n0), shut down normally."),
            ("crash", "Written through DLedgerCommitLog, then the JVM halted without shutdown (abort left)."),
            ("switched", "100 messages with the classic CommitLog (shut down), then reopened with "
                         "enableDLegerCommitLog=true and 100 more: the old commitlog/ ends at dividedCommitlogOffset, "
                         "the DLedger data starts there.")):
        gen("dledger-write", "--store", str(root / mode / "store"), "--mode", mode)
        scenarios[mode] = {"description": description, "surgery": [], "parent": None}
    crash_view = view(root / "crash" / "store")
    shutil.copytree(root / "crash" / "store", root / "corrupt-entry" / "store")
    last_file = max(e["pos"] // size for e in crash_view["entries"])
    in_last = [e for e in crash_view["entries"] if e["pos"] // size == last_file]
    scenarios["corrupt-entry"] = {
        "description": "The crash store with the pos field of an entry in the middle of the last data file flipped.",
        "surgery": [flip_entry_pos(root / "corrupt-entry" / "store", in_last[len(in_last) // 2], size)],
        "parent": "crash"}
    shutil.copytree(root / "crash" / "store", root / "corrupt-index" / "store")
    scenarios["corrupt-index"] = {
        "description": "The crash store with the term of the index unit of an entry in the middle of the last data "
                       "file flipped: the entries are intact, DLedger's recovery rewrites the index from that unit.",
        "surgery": [flip_index_term(root / "corrupt-index" / "store", in_last[len(in_last) // 2],
                                    DLEDGER_GEOMETRY["dledger_index_file_size"])],
        "parent": "crash"}
    clean_view = view(root / "clean" / "store")
    shutil.copytree(root / "clean" / "store", root / "corrupt-record" / "store")
    victim = [e for e in clean_view["entries"] if 200 <= e["body_length"] <= 2000][5]
    scenarios["corrupt-record"] = {
        "description": "The clean store with the middle byte of the body of the CommitLog record of an entry flipped: "
                       "the entry is intact for DLedger, the record's BODYCRC fails.",
        "surgery": [flip_record_body(root / "corrupt-record" / "store", victim, size)],
        "parent": "clean"}
    for name, spec in scenarios.items():
        store = root / name / "store"
        seen = view(store)
        manifest = {"scenario": name, "description": spec["description"], "derived_from": spec["parent"],
                    "rocketmq_version": version, "rocketmq_version_reported": seen.pop("rocketmq_version"),
                    "store": "store", "geometry": DLEDGER_GEOMETRY,
                    "surgery": spec["surgery"], "not_reproducible": NOT_REPRODUCIBLE, **seen}
        (root / name / "manifest.json").write_text(compact_json(manifest))
        print(f"   dledger {name}: {len(seen.get('entries', []))} entries, {len(seen.get('messages', []))} messages, "
              f"max offset {seen.get('commitlog_max_offset')}", file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    return list(scenarios)


# ------------------------------------------------------------------------ RocksDB ConsumeQueue (5.5.1)

ROCKSDB_VERSION = "5.5.1"
ROCKSDB_FOLDER = f"rocksdb-{ROCKSDB_VERSION}"      # not rocketmq-*: the classic golden tests do not apply to it
#: consumer offsets written into the clean store's config/consumerOffsets/ (topic@group/queue=offset)
ROCKSDB_OFFSETS = ("TopicTest@golden_in_range/0=5", "TopicTest@golden_in_range/1=9", "TopicTest@golden_beyond_max/2=500",
                   "OrderTopic@golden_caught_up/0=8", "%RETRY%golden_group@golden_group/0=1", "NoSuchTopic@golden_ghost/0=7")


ROCKSDB_TORN_AT = 8000     # torn: 64 zero bytes at this position of the clean store's last segment


def generate_rocksdb(out: Path, scratch: Path) -> list[str]:
    """``rocksdb-5.5.1/{clean,crash,torn}``: RocketMQ's RocksDBMessageStore writes them (RocksDBGolden write;
    torn is the clean store with an abort file and a record of its last segment zeroed), the clean one gets
    consumer offsets in RocksDB (RocksDBGolden offsets), and each manifest is RocketMQ's view (RocksDBGolden
    view: the database as stored, and a real restart on a copy)."""
    classpath = build(ROCKSDB_VERSION, rocksdb=True)
    main = "io.rocketstore.golden.RocksDBGolden"
    folder = out / ROCKSDB_FOLDER
    names = []
    for mode in ("clean", "crash", "torn"):
        sdir = folder / mode
        shutil.rmtree(sdir, ignore_errors=True)
        store = sdir / "store"
        surgery = []
        if mode == "torn":
            # the clean store as a crash leaves it with a record of its last segment torn: the log then ends
            # before the database's dispatch checkpoint, and RocketMQ truncates the queues' maxes
            shutil.copytree(folder / "clean" / "store", store)
            shutil.rmtree(store / "config" / "consumerOffsets")
            (store / "abort").write_bytes(b"")
            surgery = [zero_range(sorted((store / "commitlog").iterdir())[-1], ROCKSDB_TORN_AT, 64),
                       {"action": "create", "file": "abort"}, {"action": "delete", "file": "config/consumerOffsets"}]
        else:
            run(classpath, "write", "--store", str(store), "--mode", mode, main=main)
        offsets = ROCKSDB_OFFSETS if mode == "clean" else ()
        if offsets:
            run(classpath, "offsets", "--store", str(store), *[a for o in offsets for a in ("--set", o)], main=main)
        view = scratch / f"rocksdb-{mode}.json"
        run(classpath, "view", "--store", str(store), "--work", str(scratch / "rocksdb-work"), "--out", str(view),
            main=main)
        manifest = {"scenario": mode, "rocketmq_version": ROCKSDB_VERSION, "store": "store",
                    "store_type": "defaultRocksDB", "geometry": GEOMETRY,
                    "consumer_offsets_written": list(offsets), "surgery": surgery, "files": sorted(
                        str(p.relative_to(store)) for p in store.rglob("*") if p.is_file()),
                    **json.loads(view.read_text())}
        (sdir / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        names.append(f"{ROCKSDB_FOLDER}/{mode}")
    return names


# ------------------------------------------------------------- v1 RocksDB config: topics and groups (5.5.1)

#: (scenario, suffix of RocksDBConfigGolden's write/view commands, extra arguments): config/topics/ + config/subscriptionGroups/, config/metadata/,
#: or v2's config/rdb/
ROCKSDB_CONFIG_SCENARIOS = (("config-v1", "", ()), ("config-v1-single", "", ("--single",)), ("config-v2", "-v2", ()))


def generate_rocksdb_config(out: Path, scratch: Path) -> list[str]:
    """``rocksdb-5.5.1/{config-v1,config-v1-single,config-v2}``: topics and subscription groups written to RocksDB
    by the broker's v1 RocksDBConfigManager as RocksDBTopicConfigManager / RocksDBSubscriptionGroupManager do
    (RocksDBConfigGolden write; separate databases, or useSingleRocksDBForAllConfigs' config/metadata/), and
    topics, groups and consumer offsets written to v2's config/rdb/ by the broker's ConfigStorage as the v2
    managers do (RocksDBConfigV2Golden write); each manifest is what those managers load back (view). Only these
    folders are written: the clean, crash and torn stores of ``--rocksdb`` are left as they are."""
    classpath = build(ROCKSDB_VERSION, rocksdb=True)
    names = []
    main = "io.rocketstore.golden.RocksDBConfigGolden"
    for name, v, extra in ROCKSDB_CONFIG_SCENARIOS:
        sdir = out / ROCKSDB_FOLDER / name
        shutil.rmtree(sdir, ignore_errors=True)
        store = sdir / "store"
        run(classpath, f"write{v}", "--store", str(store), *extra, main=main)
        for log in store.rglob("LOG*"):        # RocksDB's info logs: not what the broker's managers read
            log.unlink()
        view = scratch / f"rocksdb-{name}.json"
        run(classpath, f"view{v}", "--store", str(store), *extra, "--work", str(scratch / "rocksdb-config-work"),
            "--out", str(view), main=main)
        manifest = {"scenario": name, "rocketmq_version": ROCKSDB_VERSION, "store": "store",
                    "files": sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file()),
                    **json.loads(view.read_text())}
        (sdir / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        names.append(f"{ROCKSDB_FOLDER}/{name}")
    return names


# ------------------------------------------------------------------ inner batches and BatchConsumeQueue (5.5.1)

BATCHCQ_FOLDER = f"batchcq-{ROCKSDB_VERSION}"      # not rocketmq-*: the classic golden tests do not apply to it


def generate_batchcq(out: Path, scratch: Path) -> list[str]:
    """``batchcq-5.5.1/{clean,crash}``: RocketMQ's DefaultMessageStore with a BatchCQ topic writes them
    (BatchCQGolden write: inner batches as the broker's SendMessageProcessor builds them), each manifest is
    RocketMQ's view (BatchCQGolden view: the batchconsumequeue/ units as written, a restart's getMessage per queue
    offset with what a consumer receives, and the batchconsumequeue/ RocketMQ rebuilds from the CommitLog)."""
    classpath = build(ROCKSDB_VERSION, rocksdb=True)      # the 5.5-only classes share the rocksdb build
    main = "io.rocketstore.golden.BatchCQGolden"
    folder = out / BATCHCQ_FOLDER
    names = []
    for mode in ("clean", "crash"):
        sdir = folder / mode
        shutil.rmtree(sdir, ignore_errors=True)
        store = sdir / "store"
        run(classpath, "write", "--store", str(store), "--mode", mode, main=main)
        view = scratch / f"batchcq-{mode}.json"
        run(classpath, "view", "--store", str(store), "--work", str(scratch / "batchcq-work"), "--out", str(view),
            main=main)
        manifest = {"scenario": mode, "rocketmq_version": ROCKSDB_VERSION, "store": "store", "geometry": GEOMETRY,
                    "store_files": sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file()),
                    **json.loads(view.read_text())}
        (sdir / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        names.append(f"{BATCHCQ_FOLDER}/{mode}")
    return names


# -------------------------------------------------------------------------------------- timer stores

TIMERS_VERSION = "5.5.1"
TIMERS_FOLDER = f"timers-{TIMERS_VERSION}"   # not rocketmq-*: the classic golden tests do not apply to it
#: RocketMQ's timerwheel file is 7 days x 86,400 slots x 2 x 32 bytes (38.7 MB whatever the settings), almost
#: all zero: it is committed gzip-compressed, and tests unpack it into a copy of the store (tests/golden/timers.py)
TIMER_WHEEL_GZ = "timerwheel.gz"


def generate_timers(out: Path, scratch: Path, version: str = TIMERS_VERSION) -> list[str]:
    """``timers-<version>/{clean,crash}/``: DefaultMessageStore with RocketMQ's TimerMessageStore attached
    (TimerGolden write), timers delivered during the run and timers pending at the end; the manifest is
    TimerGolden view on a copy: timercheck, every wheel slot and timerlog unit as RocketMQ reads them, its
    recover() and the timers it would deliver, plus what the writer sent."""
    import gzip
    root = out / f"timers-{version}"
    if root.exists():
        shutil.rmtree(root)
    print(f"== RocketMQ {version}: building the generator (timers)", file=sys.stderr)
    classpath = build(version, timers=True)
    names = []
    for mode in ("clean", "crash"):
        scenario = root / mode
        store = scenario / "store"
        store.mkdir(parents=True)
        sent = scratch / f"timers-{mode}-sent.json"
        view = scratch / f"timers-{mode}-view.json"
        run(classpath, "write", "--store", str(store), "--mode", mode, "--out", str(sent),
            main="io.rocketstore.golden.TimerGolden")
        run(classpath, "view", "--store", str(store), "--work", str(scratch / "timers-work"), "--out", str(view),
            main="io.rocketstore.golden.TimerGolden")
        seen = json.loads(view.read_text())
        wheel = store / "timerwheel"
        raw = wheel.read_bytes()
        with gzip.GzipFile(store / TIMER_WHEEL_GZ, "wb", mtime=0) as gz:
            gz.write(raw)
        wheel.unlink()
        manifest = {
            "scenario": mode,
            "description": "DefaultMessageStore + TimerMessageStore (timerWheelEnable, dequeue running as on a "
                           "master): timers due within seconds (delivered to TimerTopic during the run) and timers "
                           "due 10-70 minutes later (pending), plus PlainTopic records; then "
                           + ("shut down normally." if mode == "clean" else "the JVM halted without shutdown."),
            "rocketmq_version": version,
            "store": "store",
            "timerwheel": {"file": TIMER_WHEEL_GZ, "unpacked_size": len(raw),
                           "sha256": hashlib.sha256(raw).hexdigest()},
            "not_reproducible": NOT_REPRODUCIBLE,
            "written": {k: v for k, v in json.loads(sent.read_text()).items() if k != "sends"},
            **{k: v for k, v in seen.items() if k != "rocketmq_version"},
            "sends": json.loads(sent.read_text())["sends"],
        }
        (scenario / "manifest.json").write_text(compact_json(manifest))
        print(f"   timers {mode}: {len(seen['timerlog_units'])} units, {len(seen['pending'])} pending, "
              f"{len(seen['delivered'])} delivered", file=sys.stderr)
        names.append(mode)
    return names


# ------------------------------------------------------------------------ LMQ multi-dispatch (5.5.1)

LMQ_VERSION = "5.5.1"
LMQ_FOLDER = f"lmq-{LMQ_VERSION}"      # not rocketmq-*: the classic golden tests do not apply to it
#: offsets written into config/lmqConsumerOffset.json (topic@group/queue=offset; a %LMQ% group goes to
#: LmqConsumerOffsetManager's lmqOffsetTable, any other to its offsetTable)
LMQ_OFFSETS = ("%LMQ%alpha@%LMQ%alpha/0=5", "%LMQ%beta@%LMQ%reader/0=3", "%LMQ%gamma@%LMQ%beyond/0=9999",
               "LmqTopic@golden_group/0=4", "LmqTopic@golden_group/1=2", "%LMQ%alpha@plain_group/0=1")


LMQ_TORN_AT = 30000     # torn: 64 zero bytes at this position of the crash store's last written segment (a record's properties)


LMQ_CUT_AT = 31708      # cut: 16 zero bytes at this position of the crash store's last written segment (a record's body)


def last_written(store: Path) -> Path:
    """The last CommitLog segment holding a byte that is not zero (after it: segments pre-allocated empty)."""
    return sorted(p for p in (store / "commitlog").iterdir() if any(p.read_bytes()))[-1]


def generate_lmq(out: Path, scratch: Path, modes: tuple[str, ...] = ("clean", "crash", "torn", "cut")) -> list[str]:
    """``lmq-5.5.1/{clean,crash,torn,cut}``: RocketMQ's DefaultMessageStore with enableLmq + enableMultiDispatch
    writes them (LmqGolden write; crash halts without shutdown; torn and cut are the crash store with bytes of a
    record of its last segment zeroed: its properties, its body), the broker's LmqConsumerOffsetManager writes
    config/lmqConsumerOffset.json (LmqGolden offsets), and each manifest is RocketMQ's view (LmqGolden view: a
    real restart and a rebuild, each on a copy)."""
    classpath = build(LMQ_VERSION, rocksdb=True)
    main = "io.rocketstore.golden.LmqGolden"
    folder = out / LMQ_FOLDER
    names = []
    for mode in modes:
        sdir = folder / mode
        shutil.rmtree(sdir, ignore_errors=True)
        store = sdir / "store"
        surgery = []
        if mode == "cut":
            # the crash store with a record's body zeroed: its BODYCRC fails, so recovery cuts the log there
            # and truncates every queue, the %LMQ% ones too, to the records before it
            shutil.copytree(folder / "crash" / "store", store)
            surgery = [zero_range(last_written(store), LMQ_CUT_AT, 16)]
        elif mode == "torn":
            # the crash store with 64 bytes of a record of its last segment zeroed; they fall in that record's
            # properties (not covered by BODYCRC), so RocketMQ's recovery keeps the record, and its rebuild no
            # longer dispatches it to the %LMQ% queues it named (the manifest's rebuild view)
            shutil.copytree(folder / "crash" / "store", store)
            surgery = [zero_range(last_written(store), LMQ_TORN_AT, 64)]
        else:
            run(classpath, "write", "--store", str(store), "--mode", mode, main=main)
            run(classpath, "offsets", "--store", str(store), *[a for o in LMQ_OFFSETS for a in ("--set", o)],
                main=main)
        view = scratch / f"lmq-{mode}.json"
        run(classpath, "view", "--store", str(store), "--work", str(scratch / "lmq-work"), "--out", str(view),
            main=main)
        manifest = {"scenario": mode, "rocketmq_version": LMQ_VERSION, "store": "store",
                    "settings": {"enableLmq": True, "enableMultiDispatch": True}, "geometry": GEOMETRY,
                    "consumer_offsets_written": list(LMQ_OFFSETS), "surgery": surgery, "files": sorted(
                        str(p.relative_to(store)) for p in store.rglob("*") if p.is_file()),
                    **json.loads(view.read_text())}
        (sdir / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        names.append(f"{LMQ_FOLDER}/{mode}")
    return names


def checkpoint_head(store: Path) -> str | None:
    cp = store / "checkpoint"
    return cp.read_bytes()[:64].hex() if cp.exists() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", nargs="+", default=list(DEFAULT_VERSIONS),
                        help="RocketMQ versions from Maven Central (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=HERE, help="output directory (default: tests/golden)")
    parser.add_argument("--config-only", action="store_true",
                        help=f"only rewrite the config files of the existing {CONFIG_SCENARIO} stores under --out")
    parser.add_argument("--multipath", action="store_true",
                        help=f"only the multi-path CommitLog stores (multipath-{MULTIPATH_VERSION}/ under --out)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="generator JVMs run at once (every version is in progress together, each starting as "
                             "soon as its build is done; the builds stay one at a time, as Maven's local "
                             "repository is not safe for concurrent downloads)")
    parser.add_argument("--dledger", action="store_true",
                        help=f"only the DLedger CommitLog stores (dledger-{DLEDGER_VERSION}/ under --out)")
    parser.add_argument("--rocksdb", action="store_true",
                        help=f"only the RocksDB ConsumeQueue stores ({ROCKSDB_FOLDER}/: storeType=defaultRocksDB)")
    parser.add_argument("--rocksdb-config", action="store_true",
                        help=f"only the RocksDB config stores ({ROCKSDB_FOLDER}/config-v*/: v1 topics, groups; v2 config/rdb)")
    parser.add_argument("--batchcq", action="store_true",
                        help=f"only the BatchConsumeQueue stores ({BATCHCQ_FOLDER}/: queue.type=BatchCQ, inner batches)")
    parser.add_argument("--timers", action="store_true",
                        help=f"only the timer stores ({TIMERS_FOLDER}/: TimerMessageStore's timerlog and wheel)")
    parser.add_argument("--lmq", action="store_true",
                        help=f"only the LMQ multi-dispatch stores ({LMQ_FOLDER}/: enableLmq + enableMultiDispatch)")
    args = parser.parse_args(argv)
    try:
        require_tools()
        args.out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="golden-") as scratch:
            if args.multipath:
                names = multipath(args.out.resolve(), Path(scratch))
                print(f"== RocketMQ {MULTIPATH_VERSION} multi-path: {', '.join(names)}", file=sys.stderr)
                return 0
            if args.dledger:
                names = generate_dledger(args.out.resolve(), Path(scratch))
                print(f"== DLedger (RocketMQ {DLEDGER_VERSION}): {', '.join(names)}", file=sys.stderr)
                return 0
            if args.rocksdb:
                print(f"== {', '.join(generate_rocksdb(args.out.resolve(), Path(scratch)))}", file=sys.stderr)
                return 0
            if args.rocksdb_config:
                print(f"== {', '.join(generate_rocksdb_config(args.out.resolve(), Path(scratch)))}", file=sys.stderr)
                return 0
            if args.batchcq:
                print(f"== {', '.join(generate_batchcq(args.out.resolve(), Path(scratch)))}", file=sys.stderr)
                return 0
            if args.timers:
                print(f"== {', '.join(generate_timers(args.out.resolve(), Path(scratch)))}", file=sys.stderr)
                return 0
            if args.lmq:
                print(f"== {', '.join(generate_lmq(args.out.resolve(), Path(scratch)))}", file=sys.stderr)
                return 0
            runs = [VersionRun(version, args.out.resolve(), Path(scratch)) for version in args.versions]
            if args.config_only:
                for run_version in runs:
                    names = run_version.config_only()
                    print(f"== RocketMQ {run_version.version}: {', '.join(names)}", file=sys.stderr)
                return 0
            global JVM_SLOTS
            JVM_SLOTS = threading.BoundedSemaphore(max(1, args.jobs))
            with ThreadPoolExecutor(max_workers=1) as builder, ThreadPoolExecutor(max_workers=len(runs)) as pool:
                built = [builder.submit(run_version.build) for run_version in runs]

                def generate(k: int) -> list[str]:
                    built[k].result()
                    return runs[k].generate()

                # each version writes only under its own rocketmq-<version>/ and scratch directory
                for run_version, names in zip(runs, pool.map(generate, range(len(runs)))):
                    print(f"== RocketMQ {run_version.version}: {', '.join(names)}", file=sys.stderr)
    except GoldenError as e:
        print(f"regenerate: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
