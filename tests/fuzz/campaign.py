"""A seeded mutation campaign against the pure readers: damaged copies of a golden store, each read by every
reader under a time limit, with the invariants a user relies on checked after each case.

    python -m tests.fuzz.campaign --cases 2000 --seed 1          # prints a JSON summary; exit 1 on failures

Run it in its own process (the test does, with an address-space limit): a case that hangs is cut off by an
alarm, a case that allocates without bound hits the limit as a MemoryError — both are failures.

Mutations (``MUTATIONS``): bit flips and absurd header fields in CommitLog records, truncations, zero and
BLANK fills, duplicate/overlapping/misnamed segments, stray and special files (symlink loops, FIFOs,
directories, sparse giants), and corrupt ConsumeQueue, IndexFile, checkpoint and consumerOffset.json files.

With ``--tools-every K`` every K-th case also goes whole through the operator commands, as ``rocketstore``
runs them (in process, through click): ``audit`` (verify and the recovery report), ``recover report``,
``rebuild`` (with its diff against the store's files), ``recover plan`` and ``recover apply`` into a copy. Each
must end with exit 0, 3 (problems found) or 2 (a refusal naming what is wrong: a store or entry a repair cannot
take, a segment larger than RocketMQ can write, a queue a repair would renumber), never 1 or a traceback —
except the apply, whose exit 1 with one line is its refusal to publish a copy that would not start cleanly (but
never for a queue it would renumber: the plan decides that); outputs go to a scratch directory.

Invariants per case:
1. no exception from any reader or tool, no hang; strict mode raises StoreError exactly when the lenient read
   reports an error (or a BODYCRC mismatch), naming one of those checks;
2. the store's bytes are unchanged by reading;
3. records that end before the first damaged byte of their segment, and records of untouched segments,
   read exactly as from the clean store;
4. no physical offset is returned twice;
5. every clean record that is not returned is covered by a finding in its segment file at or before its
   position (or about the whole file) — except records zeroed or blanked through the end of the last
   segment's data, and records replaced by a BLANK that RocketMQ itself could have written there (the next
   segment's first record would not have fitted): no reader of the CommitLog alone can tell those from a
   shorter log (the ConsumeQueues can).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from click.testing import CliRunner  # noqa: E402

from rocketstore_spark.cli.main import cli  # noqa: E402
from rocketstore_spark.codec import config_json  # noqa: E402
from rocketstore_spark.findings import StoreError  # noqa: E402
from rocketstore_spark.store.discovery import discover  # noqa: E402
from rocketstore_spark.store.files import read_checkpoint, read_consumer_offsets  # noqa: E402
from rocketstore_spark.store.indexes import iter_entries, read_index_file  # noqa: E402
from rocketstore_spark.store.layout import StoreMap  # noqa: E402
from rocketstore_spark.store.queues import read_queue  # noqa: E402
from rocketstore_spark.store.records import read_table  # noqa: E402
from rocketstore_spark.store.scan import scan_segment  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "rocketmq-5.5.1" / "clean" / "store"
HASH_SLOTS = 64                     # the golden stores' IndexFile geometry
CASE_SECONDS = 30
ABSURD = [0, -1, 1, 0x7FFFFFFF, -0x80000000, 91, 92, 0x10000, 0x7FFFFFF0]
MALFORMED_JSON = ['{"offsetTable":{"T@g":{0:null}}}', '{"offsetTable":{"T@g":{0:1e400}}}', "[" * 50000,
                  '{"offsetTable":{"T@g":{99999999999:1}}}', '{"offsetTable":"x"}', "\xff\xfe", "",
                  '{"offsetTable":{"T@g":{0:9223372036854775808}}}', '{"offsetTable":{"nogroup":{0:1}}}']


class CaseTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise CaseTimeout(f"case exceeded {CASE_SECONDS} s")


# ------------------------------------------------------------------------------------------ the store

def build_store(work: Path) -> Path:
    """The golden store's files that our readers read, plus a consumerOffset.json and its .bak."""
    store = work / "store"
    for name in ("commitlog", "consumequeue", "index"):
        shutil.copytree(GOLDEN / name, store / name)
    shutil.copy(GOLDEN / "checkpoint", store / "checkpoint")
    (store / "config").mkdir()
    text = config_json.dumps({"TopicTest@g1": {0: 3, 1: 5}, "OrderTopic@g2": {0: 1}})
    (store / "config" / "consumerOffset.json").write_text(text)
    (store / "config" / "consumerOffset.json.bak").write_text(text)
    return store


class Undo:
    """What a mutation changed, to put back: original bytes of modified files, paths it created."""

    def __init__(self):
        self.files: dict[Path, bytes] = {}
        self.created: list[Path] = []

    def keep(self, path: Path) -> bytearray:
        if path not in self.files:
            self.files[path] = path.read_bytes()
        return bytearray(path.read_bytes())

    def write(self, path: Path, data: bytes) -> None:
        self.keep(path)
        path.write_bytes(bytes(data))

    def create(self, path: Path) -> Path:
        self.created.append(path)
        return path

    def restore(self) -> None:
        for path in reversed(self.created):
            if path.is_symlink() or path.is_file() or path.exists() and not path.is_dir():
                path.unlink()
            elif path.is_dir():
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.unlink(path)
        for path, data in self.files.items():
            with open(path, "r+b" if path.exists() else "wb") as f:
                f.write(data)
                f.truncate(len(data))


# ------------------------------------------------------------------------------------------ mutations

class Ctx:
    def __init__(self, store: Path, clean: dict, rnd: random.Random):
        self.store, self.clean, self.rnd = store, clean, rnd
        self.segments = sorted((store / "commitlog").iterdir())
        self.queue_files = sorted(p for p in (store / "consumequeue").rglob("*") if p.is_file())
        self.index_files = sorted((store / "index").iterdir())

    def segment(self) -> Path:
        return self.rnd.choice(self.segments)

    def record(self) -> dict:
        return self.rnd.choice(self.clean["rows"])


def m_bitflip(c: Ctx, u: Undo) -> dict:
    seg = c.segment()
    data = u.keep(seg)
    end = c.clean["written_end"][seg.name]
    pos = c.rnd.randrange(max(end + 16, 1))
    data[pos] ^= 1 << c.rnd.randrange(8)
    u.write(seg, data)
    return {"segment": seg.name, "from": pos, "to": pos + 1}


def m_header_field(c: Ctx, u: Undo) -> dict:
    r = c.record()
    seg = c.store / "commitlog" / f"{r['segment_base_offset']:020d}"
    data = u.keep(seg)
    bh = 20 if r["sys_flag"] & 0x10 else 8
    sh = 20 if r["sys_flag"] & 0x20 else 8
    body = 72 + bh + sh
    fields = [(0, 4), (4, 4), (12, 4), (20, 8), (28, 8), (36, 4), (40, 8), (48 + bh, 8), (body - 4, 4),
              (body + r["body_length"], 1 if r["record_version"] == 1 else 2), (r["total_size"] - 2, 2)]
    off, width = c.rnd.choice(fields)
    value = c.rnd.choice(ABSURD + [c.rnd.getrandbits(31)])
    pos = r["file_position"] + off
    data[pos:pos + width] = (value & ((1 << 8 * width) - 1)).to_bytes(width, "big")
    u.write(seg, data)
    return {"segment": seg.name, "from": pos, "to": pos + width}


def m_truncate(c: Ctx, u: Undo) -> dict:
    seg = c.segment()
    data = u.keep(seg)
    cut = c.rnd.randrange(len(data))
    u.write(seg, data[:cut])
    return {"segment": seg.name, "from": cut, "to": len(data), "truncated": True}


def m_fill(c: Ctx, u: Undo, blank: bool) -> dict:
    r = c.record() if c.rnd.random() < 0.7 else None
    seg = c.store / "commitlog" / f"{r['segment_base_offset']:020d}" if r else c.segment()
    data = u.keep(seg)
    pos = r["file_position"] if r else c.rnd.randrange(len(data))
    length = min(len(data) - pos, c.rnd.choice([8, 64, 512, 4096, len(data)]))
    fill = bytes(length)
    if blank and length >= 8:
        fill = struct.pack(">ii", len(data) - pos, -875286124) + bytes(length - 8)
    data[pos:pos + length] = fill
    u.write(seg, data)
    return {"segment": seg.name, "from": pos, "to": pos + length, "fill": True, "blank": blank and length >= 8,
            "file_size": len(data)}


def m_copy_segment(c: Ctx, u: Undo) -> dict:
    src = c.segment()
    size = len(src.read_bytes())
    last = int(c.segments[-1].name)
    base = c.rnd.choice([last + size, last + size // 2, int(src.name) + size // 2, last + 2 * size + 7])
    dst = c.store / "commitlog" / f"{base:020d}"
    if dst.exists():
        return {"noop": True}
    shutil.copy(src, u.create(dst))
    return {"layout": True}


def m_special_file(c: Ctx, u: Undo) -> dict:
    last = int(c.segments[-1].name)
    size = len(c.segments[-1].read_bytes())
    name = c.store / "commitlog" / f"{last + size:020d}"
    kind = c.rnd.choice(["loop", "fifo", "dir", "sparse", "huge_name", "dangling"])
    if kind == "loop":
        os.symlink(name.name, u.create(name))
    elif kind == "fifo":
        os.mkfifo(u.create(name))
    elif kind == "dir":
        u.create(name).mkdir()
    elif kind == "sparse":
        with open(u.create(name), "wb") as f:
            f.truncate(64 << 30)
    elif kind == "huge_name":
        u.create(c.store / "commitlog" / ("9" * 20)).write_bytes(c.segments[0].read_bytes())
    else:
        os.symlink("/nonexistent/segment", u.create(name))
    return {"layout": True, "kind": kind}


def m_queue(c: Ctx, u: Undo) -> dict:
    kind = c.rnd.choice(["bytes", "truncate", "fifo", "dir", "sparse", "huge_name", "queue_id", "topic"])
    f = c.rnd.choice(c.queue_files)
    if kind == "bytes":
        data = u.keep(f)
        for _ in range(c.rnd.randrange(1, 8)):
            data[c.rnd.randrange(len(data))] = c.rnd.getrandbits(8)
        u.write(f, data)
    elif kind == "truncate":
        data = u.keep(f)
        u.write(f, data[:c.rnd.randrange(len(data) + 1)])
    elif kind in ("fifo", "dir", "sparse", "huge_name"):
        name = f.parent / ("9" * 20 if kind == "huge_name" else f"{int(f.name) + 10 ** 9:020d}")
        if kind == "fifo":
            os.mkfifo(u.create(name))
        elif kind == "dir":
            u.create(name).mkdir()
        else:
            with open(u.create(name), "wb") as out:
                out.write(f.read_bytes()[:40])
                out.truncate(64 << 30 if kind == "sparse" else 40)
    elif kind == "queue_id":
        shutil.copytree(f.parent, u.create(f.parent.parent / str(1 << 40)))
    else:
        topic = u.create(c.store / "consumequeue" / os.fsdecode(b"bad-\xff\xfe"))
        shutil.copytree(f.parent, topic / "0")
    return {"aux": "consumequeue", "kind": kind}


def m_index(c: Ctx, u: Undo) -> dict:
    f = c.rnd.choice(c.index_files)
    data = u.keep(f)
    kind = c.rnd.choice(["count", "bytes", "truncate", "header", "sparse"])
    if kind == "count":
        data[36:40] = struct.pack(">i", c.rnd.choice([(1 << 31) - 1, -1, 0, 1 << 20]))
    elif kind == "bytes":
        for _ in range(c.rnd.randrange(1, 16)):
            data[c.rnd.randrange(len(data))] = c.rnd.getrandbits(8)
    elif kind == "truncate":
        data = data[:c.rnd.randrange(len(data) + 1)]
    elif kind == "header":
        data[0:40] = os.urandom(40)
    else:
        u.write(f, data)
        with open(f, "r+b") as out:
            out.truncate(64 << 30)
        return {"aux": "index", "kind": kind}
    u.write(f, data)
    return {"aux": "index", "kind": kind}


def m_checkpoint(c: Ctx, u: Undo) -> dict:
    f = c.store / "checkpoint"
    data = u.keep(f)
    kind = c.rnd.choice(["random", "absurd", "truncate"])
    if kind == "random":
        data[0:48] = os.urandom(48)
    elif kind == "absurd":
        data[0:24] = struct.pack(">qqq", 1 << 62, -(1 << 62), -1)
    else:
        data = data[:c.rnd.randrange(49)]
    u.write(f, data)
    return {"aux": "checkpoint", "kind": kind}


def m_config(c: Ctx, u: Undo) -> dict:
    name = c.rnd.choice(["consumerOffset.json", "consumerOffset.json.bak"])
    f = c.store / "config" / name
    u.keep(f)
    text = c.rnd.choice(MALFORMED_JSON + [os.urandom(64).decode("latin-1")])
    u.write(f, text.encode("utf-8", "surrogateescape"))
    return {"aux": "config", "kind": name}


MUTATIONS = {
    "bitflip": (m_bitflip, 30), "header_field": (m_header_field, 25), "truncate": (m_truncate, 6),
    "zero_fill": (lambda c, u: m_fill(c, u, blank=False), 10), "blank_fill": (lambda c, u: m_fill(c, u, blank=True), 6),
    "copy_segment": (m_copy_segment, 4), "special_file": (m_special_file, 4), "queue": (m_queue, 6),
    "index": (m_index, 4), "checkpoint": (m_checkpoint, 2), "config": (m_config, 3),
}


# ------------------------------------------------------------------------------------------ reading

def snapshot(store: Path) -> dict:
    out = {}
    for root, dirs, files in os.walk(store):
        for name in files + dirs:
            p = Path(root) / name
            st = os.lstat(p)
            if os.path.islink(p) or not os.path.isfile(p):
                out[str(p)] = ("special", st.st_mode)
            elif st.st_size > 64 << 20:           # sparse giants: size and the first MiB
                with open(p, "rb") as f:
                    out[str(p)] = (st.st_size, hashlib.sha256(f.read(1 << 20)).hexdigest())
            else:
                out[str(p)] = (st.st_size, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def read_everything(store: Path) -> tuple[list[dict], list]:
    table, findings = read_table(store)
    rows = table.to_pylist()
    # strict stops exactly on what the lenient read reports as an error (a BODYCRC mismatch included)
    errors = {f.check for f in findings if f.severity == "error"}
    if not all(r["body_crc_ok"] for r in rows):
        errors.add("commitlog.body_crc")
    try:
        read_table(store, strict=True)
        raised = None
    except StoreError as e:
        raised = e.finding.check
    if (raised is None) != (not errors) or (raised is not None and raised not in errors):
        raise AssertionError(f"strict raised {raised!r}; the lenient read's errors: {sorted(errors)}")
    layout = discover(store)[0]
    for k, seg in enumerate(layout.segments):
        findings += scan_segment(seg.path, seg.base_offset, followed=layout.followed(k)).findings
    files = StoreMap.of_root(store)
    for _, _, qdir in files.queue_dirs():
        for _ in read_queue(str(qdir)):
            pass
    for f in files.index_files():
        for _ in iter_entries(read_index_file(str(f), HASH_SLOTS)):
            pass
    read_checkpoint(files)
    read_consumer_offsets(files)
    return rows, findings


def rocketstore(*argv, allowed=(0, 2, 3)):
    """``rocketstore ARGV`` in process; AssertionError unless it exits with one of ``allowed`` without a
    traceback (what the operator would see: exit 1 is an internal failure)."""
    result = CliRunner().invoke(cli, [str(a) for a in argv])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"rocketstore {argv[0]}: {type(result.exception).__name__}: {result.exception}"[:300])
    if result.exit_code not in allowed or "Traceback" in result.output:
        raise AssertionError(f"rocketstore {' '.join(map(str, argv[:2]))} exit {result.exit_code}: "
                             f"{result.output[-300:]}")
    return result


def run_tools(store: Path) -> list[str]:
    """The operator commands on the store (module docstring; outputs in a scratch directory): what they say
    about the store is not judged here, only how each ends. Returns notes (refusals)."""
    notes = []
    with tempfile.TemporaryDirectory(prefix="campaign-tools-") as scratch:
        scratch = Path(scratch)
        rocketstore("audit", store, "--json")
        rocketstore("recover", "report", store, "--json")
        rocketstore("rebuild", store, "--output", scratch / "rebuilt")
        plan = rocketstore("recover", "plan", store, "--output", scratch / "plan")
        if plan.exit_code == 2:
            return notes + [f"plan refused: {plan.output.strip()}"[:300]]
        applied = rocketstore("recover", "apply", scratch / "plan", "--output", scratch / "repaired",
                              allowed=(0, 1))
        if applied.exit_code == 1:
            if len(applied.output.strip().splitlines()) != 1:
                raise AssertionError(f"recover apply exit 1 without a one-line reason: {applied.output[-300:]}")
            if "renumber" in applied.output:
                # the plan places the kept log as the rebuild will and keeps or refuses what it would renumber
                raise AssertionError(f"recover plan promised a repair its apply refused: {applied.output[-300:]}")
            notes.append(f"apply refused: {applied.output.strip()}"[:300])
    return notes


def clean_reference(store: Path) -> dict:
    rows, findings = read_everything(store)
    assert not findings, findings
    written_end = {}
    for seg in sorted((store / "commitlog").iterdir()):
        mine = [r for r in rows if r["segment_base_offset"] == int(seg.name)]
        written_end[seg.name] = max((r["file_position"] + r["total_size"] for r in mine), default=0)
    return {"rows": rows, "by_offset": {r["physical_offset"]: r for r in rows}, "written_end": written_end,
            "last_segment": sorted(written_end)[-1]}


def check_case(store: Path, clean: dict, mutation: dict, rows: list[dict], findings: list) -> list[str]:
    problems = []
    offsets = [r["physical_offset"] for r in rows]
    if len(set(offsets)) != len(offsets):
        problems.append("a physical offset was returned twice")
    got = {r["physical_offset"]: r for r in rows}
    touched = mutation.get("segment")
    for offset, want in clean["by_offset"].items():
        seg = f"{want['segment_base_offset']:020d}"
        intact = seg != touched or want["file_position"] + want["total_size"] <= mutation["from"]
        if offset in got:
            if intact and got[offset] != want:
                problems.append(f"record {offset} before the damage differs")
            continue
        if mutation.get("layout") or mutation.get("aux"):
            problems.append(f"record {offset} lost by a layout or auxiliary-file mutation")
            continue
        if intact and not mutation.get("truncated"):
            problems.append(f"record {offset} before the damage is missing")
            continue
        if (mutation.get("fill") and seg == clean["last_segment"]
                and mutation["to"] >= clean["written_end"][seg]):
            continue                                # filled to the end of the log: looks like a shorter log
        if mutation.get("blank") and mutation["to"] >= mutation["file_size"]:
            following = clean["by_offset"].get(want["segment_base_offset"] + mutation["file_size"])
            room = mutation["file_size"] - mutation["from"]
            if following is None or following["total_size"] + 8 > room:
                continue                            # a BLANK exactly as RocketMQ would have written it
        path = str(store / "commitlog" / seg)
        if not any(f.file == path and (f.file_position is None or f.file_position <= want["file_position"])
                   for f in findings):
            problems.append(f"record {offset} lost without a finding at or before byte {want['file_position']}")
    return problems


def run(cases: int, seed: int, only: str | None = None, tools_every: int = 0) -> dict:
    signal.signal(signal.SIGALRM, _alarm)
    rnd = random.Random(seed)
    kinds = [k for k in MUTATIONS if only in (None, k)]
    weights = [MUTATIONS[k][1] for k in kinds]
    failures, counts, refusals = [], {}, []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        store = build_store(Path(tmp))
        clean = clean_reference(store)
        pristine = snapshot(store)
        ctx = Ctx(store, clean, rnd)
        for case in range(cases):
            kind = rnd.choices(kinds, weights)[0]
            counts[kind] = counts.get(kind, 0) + 1
            undo = Undo()
            mutation = {}
            try:
                signal.alarm(CASE_SECONDS)
                mutation = MUTATIONS[kind][0](ctx, undo)
                before = snapshot(store)
                rows, findings = read_everything(store)
                problems = check_case(store, clean, mutation, rows, findings)
                if tools_every and case % tools_every == 0:
                    refusals += [{"case": case, "kind": kind, "note": note} for note in run_tools(store)]
                if snapshot(store) != before:
                    problems.append("reading changed the store")
            except BaseException as e:              # noqa: BLE001 — every escape is a failure to report
                if isinstance(e, KeyboardInterrupt):
                    raise
                problems = [f"{type(e).__name__}: {e}"[:300], traceback.format_exc(limit=3)[-600:]]
            finally:
                signal.alarm(0)
                undo.restore()
            if problems:
                failures.append({"case": case, "kind": kind, "mutation": mutation, "problems": problems[:3]})
            if snapshot(store) != pristine:
                failures.append({"case": case, "kind": kind, "problems": ["undo left the store changed"]})
                break
    return {"cases": cases, "seed": seed, "seconds": round(time.perf_counter() - started, 1), "kinds": counts,
            "tool_cases": len(range(0, cases, tools_every)) if tools_every else 0, "refusals": refusals,
            "failures": failures}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--only", choices=sorted(MUTATIONS))
    p.add_argument("--memory-gib", type=float, default=0, help="address-space limit for this process")
    p.add_argument("--tools-every", type=int, default=0, metavar="K",
                   help="every K-th case also through verify, the recovery report, the rebuild and a repair")
    p.add_argument("--no-fsync", action="store_true",
                   help="os.fsync does nothing in this process (the tests pass it): the campaign judges how each "
                        "command ends and what the readers return, never durability, which tests/store/test_durable.py "
                        "and tests/recovery/test_apply_faults.py check through the fsync calls themselves; every path "
                        "is still opened as for its fsync. The tools' fsyncs were 35-55%% of a tool case's time")
    args = p.parse_args(argv)
    if args.no_fsync:
        os.fsync = lambda fd: None
    if args.memory_gib:
        limit = int(args.memory_gib * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    result = run(args.cases, args.seed, args.only, args.tools_every)
    print(json.dumps(result, indent=1, default=str))
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
