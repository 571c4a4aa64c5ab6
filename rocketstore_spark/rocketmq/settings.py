"""The broker settings and RocketMQ release a rebuild follows, and where each came from (driver).

Each setting is taken, in order, from an explicit option, the broker's properties file (``--broker-conf``),
what the store's own files show, or RocketMQ's default (``codec.broker_conf.STORE_SETTINGS``). What the
files show:

* ``mappedFileSizeConsumeQueue``: the size of the existing ConsumeQueue files (the broker preallocates every
  file to it);
* ``maxHashSlotNum``/``maxIndexNum``: the geometry of the existing IndexFiles (``store.indexes``);
* the release family's index keys: whether the oldest IndexFile with entries holds ``topic#T#TAGS`` keys
  for the records it covers (5.4.0 and later do; earlier releases do not). Without IndexFiles or tagged records the
  release cannot be told from the store: 4.9.8 is assumed and said so.

A given setting (option or broker.conf) that contradicts what the files show is a conflict: the rebuild
refuses (a ConsumeQueue or IndexFile of another size is one RocketMQ would misread) unless told to go ahead.

Resolved settings travel in the documents we write (the repair plan, the rebuild's and audit's JSON) as
``BrokerSettings.to_json()``; ``from_json`` gives them back as they were decided, nothing re-read:

    release, release_label, release_family      the RocketMQ release followed, as read, and its family
    values      every broker_conf.STORE_SETTINGS value used      sources   setting -> where its value came from
    conflicts   given settings the store's files contradict      broker_conf   the file given, if any, and the
                                                                               sha256 of its content
"""
from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from rocketstore_spark.codec import broker_conf
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.codec.lmq import LMQ_NAME as LMQ_PREFIX
from rocketstore_spark.codec.indexfile import Geometry
from rocketstore_spark.rocketmq import dispatch
from rocketstore_spark.rocketmq.consumequeue import file_size_setting
from rocketstore_spark.rocketmq.releases import Release
from rocketstore_spark.store import multipath
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.indexes import SlotCounts, iter_entries, read_index_file, store_slot_count
from rocketstore_spark.store.layout import stat_once
from rocketstore_spark.store.segment_reader import SegmentReader

DEFAULT_RELEASE = "4.9.8"
SAMPLE_ENTRIES = 4096


@dataclass
class BrokerSettings:
    release: Release
    consume_queue_file_size: int
    geometry: Geometry | None                # None: messageIndexEnable=false
    message_delay_level: str
    sources: dict[str, str] = field(default_factory=dict)       # setting -> where its value came from
    conflicts: list[str] = field(default_factory=list)
    values: dict = field(default_factory=dict)                  # every broker_conf.STORE_SETTINGS value used
    release_label: str = ""                  # the release as a person should read it ("5.4.0 or later")

    broker_conf: dict | None = None          # {"path", "sha256"} of the broker.conf read, if one was

    def __post_init__(self):
        self.release_label = self.release_label or str(self.release)

    def to_json(self) -> dict:
        """The settings as decided (module docstring), JSON-ready."""
        return {"release": str(self.release), "release_label": self.release_label,
                "release_family": self.release.family.name, "values": dict(self.values),
                "sources": dict(self.sources), "conflicts": list(self.conflicts), "broker_conf": self.broker_conf}

    @classmethod
    def from_json(cls, obj: dict) -> "BrokerSettings":
        """The settings ``to_json`` wrote, as they were: nothing is resolved again."""
        values = obj["values"]
        geometry = Geometry(values["maxHashSlotNum"], values["maxIndexNum"]) if values["messageIndexEnable"] \
            else None
        return cls(Release.parse(obj["release"]), file_size_setting(values["mappedFileSizeConsumeQueue"]), geometry,
                   values["messageDelayLevel"], dict(obj["sources"]), list(obj["conflicts"]), dict(values),
                   obj["release_label"], obj.get("broker_conf"))


def file_digest(path: str) -> str:
    """The sha256 of a file's content (a broker.conf, to tell later whether it changed)."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def with_layout_dirs(layout: StoreLayout, options: dict | None) -> dict | None:
    """``options`` with the CommitLog directories ``layout`` was discovered with (``discover(commitlog_dirs=)``,
    a multi-path log), for callers that discover the store again by its name (``verify_store``,
    ``recovery_report``): without them those would read one directory's segments. Options that give the
    directories themselves win."""
    if not layout.files.commitlog_dirs or (options or {}).get(multipath.STORE_PATH):
        return options
    return {**(options or {}), multipath.STORE_PATH: [str(d) for d in layout.files.commitlog_dirs]}


def resolve(layout: StoreLayout, options: dict | None = None, broker_conf_path: str | None = None,
            slot_counts: SlotCounts | None = None) -> BrokerSettings:
    """Settings for rebuilding ``layout``'s store (module docstring). ``options``: setting name (as in
    broker.conf, plus ``rocketmqVersion``) -> value; None values are ignored. ``slot_counts``: the older
    IndexFiles' slot counts known from an earlier run (``store.indexes.SlotCounts``: the scrub's)."""
    given, sources, conf = {}, {}, None
    dirs = (options or {}).get(multipath.STORE_PATH)       # the CommitLog's directories, given (store.multipath)
    if dirs:
        layout.use_commitlog_dirs(multipath.split(dirs) if isinstance(dirs, str) else dirs)
    if broker_conf_path:
        with open(broker_conf_path, "rb") as f:
            raw = f.read()
        conf = {"path": os.path.abspath(broker_conf_path), "sha256": hashlib.sha256(raw).hexdigest()}
        text = raw.decode("utf-8", errors="replace")
        properties = broker_conf.parse_properties(text)
        layout.note_broker_conf(properties)             # an engine only broker.conf shows is refused like the rest
        for k, v in broker_conf.store_settings(properties).items():
            given[k], sources[k] = v, f"broker.conf ({broker_conf_path})"
    for k, v in (options or {}).items():
        if v is not None:
            if isinstance(v, str) and k in broker_conf.STORE_SETTINGS:      # typed as broker.conf values are
                v = broker_conf.store_settings({k: v})[k]
            given[k], sources[k] = v, "option"
    values = {k: default for k, (_, default) in broker_conf.STORE_SETTINGS.items()}
    sources.update({k: "RocketMQ's default" for k in values if k not in sources})
    values.update({k: v for k, v in given.items() if k in values})
    conflicts = []

    observed_cq = _observed_cq_file_size(layout)
    if observed_cq is not None:
        if "mappedFileSizeConsumeQueue" in given:
            if file_size_setting(given["mappedFileSizeConsumeQueue"]) != observed_cq:
                conflicts.append(f"mappedFileSizeConsumeQueue={given['mappedFileSizeConsumeQueue']} "
                                 f"({sources['mappedFileSizeConsumeQueue']}) but the store's ConsumeQueue files "
                                 f"are {observed_cq} bytes")
        else:
            values["mappedFileSizeConsumeQueue"] = observed_cq
            sources["mappedFileSizeConsumeQueue"] = "the store's ConsumeQueue files"

    index_files = [str(p) for p in layout.files.index_files()]
    observed_slots = store_slot_count(index_files, slot_counts) if index_files else None
    # the geometry of the first IndexFile that has one with that slot count (a damaged or foreign file has none)
    observed = next((g for g in (read_index_file(p, observed_slots).geometry for p in index_files) if g is not None),
                    None) if observed_slots is not None else None
    if observed is not None:
        for name, seen in (("maxHashSlotNum", observed.hash_slot_num), ("maxIndexNum", observed.index_num)):
            if name in given and given[name] != seen:
                conflicts.append(f"{name}={given[name]} ({sources[name]}) but the store's IndexFiles have {seen}")
            elif name not in given:
                values[name], sources[name] = seen, "the store's IndexFiles"
    geometry = Geometry(values["maxHashSlotNum"], values["maxIndexNum"]) if values["messageIndexEnable"] else None

    lmq = lmq_evidence(layout)
    for name in ("enableMultiDispatch", "enableLmq"):
        if lmq and name not in given:
            values[name], sources[name] = True, f"the store's {lmq}"
    geometry = Geometry(values["maxHashSlotNum"], values["maxIndexNum"]) if values["messageIndexEnable"] else None

    version = given.get("rocketmqVersion")
    label = ""
    if version is not None:
        release = Release.parse(str(version))
        sources["rocketmqVersion"] = sources.get("rocketmqVersion", "option")
        tags = detect_index_tags(layout, observed_slots) if observed_slots is not None else None
        if tags is not None and tags != release.index_tags:
            conflicts.append(f"RocketMQ {release} {'indexes' if release.index_tags else 'does not index'} TAGS "
                             f"but the store's IndexFiles {'do' if tags else 'do not'}")
    else:
        tags = detect_index_tags(layout, observed_slots) if observed_slots is not None else None
        five = detect_5x(layout)
        if tags:
            release, label = Release.parse("5.4.0"), "5.4.0 or later"
            sources["rocketmqVersion"] = "the IndexFiles hold topic#T#TAGS keys: 5.4.0 or later"
        elif five:
            release = Release.parse("5.0.0")
            label = "5.x, before 5.4.0" if tags is not None else "5.x"
            sources["rocketmqVersion"] = (f"5.x ({five}); " + ("the IndexFiles hold no topic#T#TAGS keys: before "
                                          "5.4.0" if tags is not None else "5.4.0+ cannot be told apart: no "
                                          "IndexFile entries of tagged messages; give it"))
        elif tags is None:
            release, label = Release.parse(DEFAULT_RELEASE), f"{DEFAULT_RELEASE} (assumed)"
            sources["rocketmqVersion"] = (f"assumed {DEFAULT_RELEASE}: the store does not show its release "
                                          "(no IndexFile entries of tagged messages, no 5.x files); give it")
        else:
            release, label = Release.parse(DEFAULT_RELEASE), "4.x"
            sources["rocketmqVersion"] = ("the IndexFiles hold no topic#T#TAGS keys and the store has no 5.x "
                                          "files: 4.x (dispatch as 4.9.8)")
    if not release.checked:
        sources["rocketmqVersion"] = (sources.get("rocketmqVersion", "") + f"; RocketMQ {release} is outside the "
                                      "releases these rules were read from (4.x to 5.5.1): dispatched by the "
                                      "newest rules known, unverified")
    return BrokerSettings(release, file_size_setting(values["mappedFileSizeConsumeQueue"]), geometry,
                           values["messageDelayLevel"], sources, conflicts, values, label, conf)


def lmq_evidence(layout: StoreLayout) -> str | None:
    """What in the store's files shows LMQ multi-dispatch (a ``%LMQ%`` queue directory, or the
    ``config/lmqConsumerOffset.json`` only a broker with enableLmq writes), or None."""
    cq = layout.files.consumequeue_dir
    try:
        queue = next((e.name for e in os.scandir(cq) if e.name.startswith(LMQ_PREFIX)), None) if cq else None
    except OSError:
        queue = None
    if queue is not None:
        return f"{queue} queue in consumequeue/"
    if any(p.is_file() for p in layout.files.lmq_consumer_offsets_paths()):
        return "config/lmqConsumerOffset.json"
    return None


def lmq_mode(settings: BrokerSettings) -> int:
    """How the store dispatches LMQ (``codec.dispatch_kernel.LMQ_*``) by the resolved settings."""
    values = settings.values
    if not values.get("enableMultiDispatch"):
        return 0
    return 2 if values.get("enableLmq") else 1


def detect_5x(layout: StoreLayout) -> str | None:
    """Why the store was written by RocketMQ 5.x, or None: a 5.x-only directory in the store root, an
    ``abort.bak`` or a non-empty ``abort``, or a checkpoint with 5.x fields set (bytes 24..47 are zero in
    4.x)."""
    files = layout.files
    if files.root is None:
        return None
    five_x = files.five_x_dirs()
    if five_x:
        return f"it has {five_x[0].name}/"
    # 5.x keeps abort.bak next to abort and writes into abort; 4.x leaves an empty abort and no abort.bak
    if files.abort_bak_path.is_file():
        return f"it has {files.abort_bak_path.name}"
    abort = files.abort_path
    if abort.is_file() and abort.stat().st_size > 0:
        return "its abort file is not empty"
    path = layout.files.checkpoint_path
    if path is not None and os.path.isfile(path):
        with open(path, "rb") as f:
            head = f.read(48)
        if any(head[24:48]):
            return "its checkpoint has 5.x fields"
    return None


def _observed_cq_file_size(layout: StoreLayout) -> int | None:
    sizes = Counter()
    for _, _, queue_dir in layout.files.queue_dirs():
        for path, _ in layout.files.queue_files(queue_dir):
            sizes[stat_once(path).st_size] += 1
            if sum(sizes.values()) >= 64:
                break
    sizes.pop(0, None)
    return sizes.most_common(1)[0][0] if sizes else None


def detect_index_tags(layout: StoreLayout, slots: int) -> bool | None:
    """Whether the oldest IndexFile with entries holds ``topic#T#TAGS`` keys for the tagged records it covers
    (its first SAMPLE_ENTRIES entries); None when it covers no tagged record."""
    for path in layout.files.index_files():
        view = read_index_file(str(path), slots)
        if view.geometry is not None and view.entry_count:
            break
    else:
        return None
    _, entries = next(iter_entries(view, SAMPLE_ENTRIES))
    entries = entries[:SAMPLE_ENTRIES]
    present = set(zip(entries["key_hash"].astype(np.int64).tolist(), entries["phy_offset"].astype(np.int64).tolist()))
    lo, hi = int(entries["phy_offset"].min()), int(entries["phy_offset"].max())
    batches = []
    decoder = RecordDecoder(dispatch.DISPATCH_COLUMNS)
    for seg in layout.segments:
        if seg.base_offset + seg.size <= lo or seg.base_offset > hi:
            continue
        # only the records the sampled entries point into, not their whole segments (1 GiB by default)
        start, end = max(0, lo - seg.base_offset), min(seg.size, hi - seg.base_offset + 1)
        for decoded in SegmentReader(seg.path, seg.base_offset, decoder, start, end):
            batches.append(decoded.batch)
    if not batches:
        return None
    records = pa.Table.from_batches(batches)
    keys = dispatch.index_keys(records, Release((5, 5, 0)))
    tagged = [(h, p) for k, h, p in zip(keys["kind"].to_pylist(), keys["key_hash"].to_pylist(),
                                        keys["physical_offset"].to_pylist())
              if k == dispatch.KIND_TAGS and lo <= p <= hi]
    if not tagged:
        return None
    hits = sum((h, p) in present for h, p in tagged)
    return hits * 2 >= len(tagged)
