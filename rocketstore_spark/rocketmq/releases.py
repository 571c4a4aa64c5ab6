"""RocketMQ releases, and everything our rules do differently from one release family to the next, in one table.

Where the broker's behaviour changed between releases, the change is a column of ``FAMILIES`` below, and code
asks a ``Release`` (or a ``Family``) for the behaviour, never compares version numbers itself. The families and
their differences (docs/format/recovery.md "Version differences", docs/format/rocketmq-dispatch.md):

| family        | releases        | normal start              | crash start              | normal-start dispatch  | index TAGS | expired min |
|---------------|-----------------|---------------------------|--------------------------|------------------------|------------|-------------|
| 4.9.x         | 4.x             | third-last segment        | first record's time      | after the cut, from    | no         | 0           |
|               |                 |                           | <= checkpoint - 3 s      | the largest queue end  |            |             |
| 5.0-5.3.1     | 5.0.0 - 5.3.1   | third-last segment        | same                     | none                   | no         | max offset  |
| 5.3.2-5.3.x   | 5.3.2 - 5.3.x   | last with base <= maxCQ   | same                     | during the walk        | no         | max offset  |
| 5.5.x         | 5.4.0 and later | newest valid first record | first record's offset <= | during the walk        | yes        | max offset  |
|               |                 | <= maxCQ (10 back at most)| logicsPhysicalOffset     |                        |            |             |

5.x (every family after 4.9.x) has BatchConsumeQueues: a topic's ``queue.type`` attribute (config/topics.json) says
whether its queues live in ``consumequeue/`` (SimpleCQ, the default) or ``batchconsumequeue/`` (BatchCQ), and
``ConsumeQueueStore.loadConsumeQueues`` throws for a queue directory of the other kind (``queue_type_checked``;
the same rule in 5.1.4, 5.3.3 and 5.5.1). 4.x has neither: its TopicConfig has no attributes and it loads
``consumequeue/`` only.

A crash recovery dispatches inside ``load()``; 4.x loads its ScheduleMessageService (the delay-level table) only
after that, so the SCHEDULE_TOPIC_XXXX entries it writes keep the TAGS hash as tagsCode, not the delivery time
(``recovery_delay_levels`` False; 5.x parses the table in the store's constructor).

5.4.x, whose recovery source was not read, is taken as 5.5.x (its dispatch was read: it indexes TAGS). Pure;
imported wherever settings are resolved (driver, executor, CLI).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class NormalStart(Enum):
    """Which segment a clean start's CommitLog walk begins at (``CommitLog.recoverNormally``)."""
    THIRD_LAST = "the third-last segment (or the first)"
    LAST_BELOW_MAX_CQ = "the last segment whose base offset <= maxCQ"
    NEWEST_VALID_BELOW_MAX_CQ = "the newest segment whose first record is valid with PHYSICALOFFSET <= maxCQ"


class CrashStart(Enum):
    """Which segment a start after a crash walks from (``CommitLog.recoverAbnormally``)."""
    MIN_TIMESTAMP = "the newest segment whose first record's store time <= the checkpoint's minimum"
    LOGICS_PHYSICAL_OFFSET = "the newest segment whose first record's PHYSICALOFFSET <= logicsPhysicalOffset"


class NormalDispatch(Enum):
    """What a clean start dispatches into the ConsumeQueues."""
    FROM_QUEUE_END_AFTER_CUT = "after the cut, from the largest queue end (reput at start())"
    NONE = "nothing (reput from the end of the log)"
    DURING_WALK = "the records beyond maxCQ, during the walk"


@dataclass(frozen=True)
class Family:
    """One release family: the releases from ``first`` up to the next family's first, and how they behave."""
    name: str
    first: tuple[int, int, int]
    normal_start: NormalStart
    crash_start: CrashStart
    normal_dispatch: NormalDispatch
    index_tags: bool                # IndexService.buildIndex also puts topic#T#TAGS (the whole TAGS value)
    expired_min_is_max: bool        # a queue whose every entry is expired: min offset = max offset (else 0)
    recovery_delay_levels: bool = True  # the delay-level table is loaded when a crash recovery dispatches
    queue_type_checked: bool = True     # the load throws for a queue directory of the other queue.type (5.x)

    def __str__(self) -> str:
        return self.name


FAMILIES: tuple[Family, ...] = (
    Family("4.9.x", (4, 0, 0), NormalStart.THIRD_LAST, CrashStart.MIN_TIMESTAMP,
           NormalDispatch.FROM_QUEUE_END_AFTER_CUT, index_tags=False, expired_min_is_max=False,
           recovery_delay_levels=False, queue_type_checked=False),
    Family("5.0-5.3.1", (5, 0, 0), NormalStart.THIRD_LAST, CrashStart.MIN_TIMESTAMP,
           NormalDispatch.NONE, index_tags=False, expired_min_is_max=True),
    Family("5.3.2-5.3.x", (5, 3, 2), NormalStart.LAST_BELOW_MAX_CQ, CrashStart.MIN_TIMESTAMP,
           NormalDispatch.DURING_WALK, index_tags=False, expired_min_is_max=True),
    Family("5.5.x", (5, 4, 0), NormalStart.NEWEST_VALID_BELOW_MAX_CQ, CrashStart.LOGICS_PHYSICAL_OFFSET,
           NormalDispatch.DURING_WALK, index_tags=True, expired_min_is_max=True),
)
FAMILY_NAMES = tuple(f.name for f in FAMILIES)
NEWEST_READ = (5, 5, 1)             # the newest release whose source these rules were checked against


def family_named(name: str) -> Family:
    """The family called ``name`` (one of ``FAMILY_NAMES``); ValueError naming the choices otherwise."""
    for f in FAMILIES:
        if f.name == name:
            return f
    raise ValueError(f"release family {name!r}: expected one of {', '.join(FAMILY_NAMES)}")


@dataclass(frozen=True)
class Release:
    """A RocketMQ release (X.Y.Z) and its family's behaviour."""
    version: tuple[int, int, int]

    @classmethod
    def parse(cls, text: str) -> "Release":
        m = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
        if not m:
            raise ValueError(f"RocketMQ version {text!r}: expected X.Y.Z, e.g. 4.9.8 or 5.5.1")
        return cls((int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)))

    @property
    def checked(self) -> bool:
        """Whether this release lies within the releases whose source the rules were read from (4.x to
        5.5.1); a newer one follows the newest rules known, an older one the oldest."""
        return FAMILIES[0].first <= self.version <= NEWEST_READ

    @property
    def family(self) -> Family:
        """The family this release belongs to (a release before 4.0 is taken as 4.9.x)."""
        found = FAMILIES[0]
        for f in FAMILIES:
            if self.version >= f.first:
                found = f
        return found

    @property
    def index_tags(self) -> bool:
        return self.family.index_tags

    @property
    def expired_min_is_max(self) -> bool:
        return self.family.expired_min_is_max

    def __str__(self) -> str:
        return ".".join(map(str, self.version))
