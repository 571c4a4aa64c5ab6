package io.rocketstore.golden;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;

import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.TopicFilterType;
import org.apache.rocketmq.common.constant.PermName;
import org.apache.rocketmq.common.sysflag.TopicSysFlag;
import org.apache.rocketmq.remoting.protocol.RemotingSerializable;

/**
 * config/topics.json, config/subscriptionGroup.json and config/delayOffset.json the way the broker writes
 * them, and what RocketMQ was given for each (returned by {@link #write}, kept by regenerate.py as the
 * scenario's config-manifest.json: tests compare the parse against these values, not against the file).
 *
 * <ul>
 *   <li>topics.json: TopicConfigManager.encode — RocketMQ's own TopicConfigSerializeWrapper (rocketmq-common
 *   in 4.x, rocketmq-remoting in 5.x) holding the TopicConfig table and a DataVersion, toJson(pretty). The
 *   file is read back with the same class, which must return the table it was given.</li>
 *   <li>subscriptionGroup.json: SubscriptionGroupManager.encode — RemotingSerializable.toJson of the manager
 *   itself, mirrored by {@link Groups} (4.9.8: subscriptionGroupTable, dataVersion; 5.x also forbiddenTable,
 *   checked against the rocketmq-broker-5.5.1 source) holding RocketMQ's own SubscriptionGroupConfig
 *   objects.</li>
 *   <li>delayOffset.json: 4.9.8's store runs ScheduleMessageService itself, which wrote the file during the
 *   store phases: it is left as it is and read back with RocketMQ's DelayOffsetSerializeWrapper.fromJson
 *   (what ScheduleMessageService.decode does). In 5.x the service lives in rocketmq-broker: its encode (a
 *   DelayOffsetSerializeWrapper of offsetTable and dataVersion) is mirrored by {@link DelayOffsetsV5}.</li>
 * </ul>
 *
 * Every file is persisted twice through ConfigManager.persist(), so its .bak holds the first state: the
 * system topics and groups a broker's managers create at start-up (delay offsets: all 0); the file then
 * adds the golden topics and groups. Tables are ConcurrentHashMaps of the managers' initial capacities, so
 * entries come out in the order the broker's would.
 */
final class ConfigFiles {
    static final int RW = PermName.PERM_READ | PermName.PERM_WRITE;
    static final String[] GROUP_FIELDS = {"groupName", "consumeEnable", "consumeFromMinEnable",
        "consumeBroadcastEnable", "consumeMessageOrderly", "retryQueueNums", "retryMaxTimes", "brokerId",
        "whichBrokerWhenConsumeSlowly", "notifyConsumerIdsChangedEnable", "groupSysFlag", "consumeTimeoutMinute",
        "attributes"};
    /** SubscriptionGroupConfig fields 4.9.8 does not have. */
    static final Set<String> V5_GROUP_FIELDS = Set.of("consumeMessageOrderly", "groupSysFlag",
        "consumeTimeoutMinute", "attributes");

    private ConfigFiles() {
    }

    static Map<String, Object> write(Path root, Map<Integer, Long> delayOffsets) throws Exception {
        Path dir = root.resolve("config");
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        out.put("topics", topics(dir.resolve("topics.json").toString()));
        out.put("subscription_groups", groups(dir.resolve("subscriptionGroup.json").toString()));
        Path delay = dir.resolve("delayOffset.json");
        out.put("delay_offsets", Rmq.V5 ? writeDelayOffsets(delay.toString(), delayOffsets) : readDelayOffsets(delay));
        return out;
    }

    // ------------------------------------------------------------------------------------------ topics

    static Map<String, Object> topics(String path) throws Exception {
        ConcurrentMap<String, TopicConfig> table = new ConcurrentHashMap<>(1024);
        Object dataVersion = Rmq.newInstance(Rmq.DATA_VERSION);
        Map<String, Object> out = new LinkedHashMap<>();
        for (TopicConfig t : systemTopics()) {                 // TopicConfigManager's constructor
            table.put(t.getTopicName(), t);
        }
        persistTopics(path, table, dataVersion);
        out.put("bak", describeTopics(table));
        for (TopicConfig t : goldenTopics()) {                 // updateTopicConfig: put, nextVersion, persist
            table.put(t.getTopicName(), t);
            Rmq.invoke(dataVersion, "nextVersion");
        }
        persistTopics(path, table, dataVersion);
        out.put("current", describeTopics(table));
        Object back = RemotingSerializable.fromJson(Files.readString(Path.of(path)), Class.forName(Rmq.TOPIC_CONFIG_WRAPPER));
        if (!table.equals(Rmq.invoke(back, "getTopicConfigTable"))) {
            throw new IllegalStateException("RocketMQ does not read back the topics.json it wrote");
        }
        return out;
    }

    static void persistTopics(String path, ConcurrentMap<String, TopicConfig> table, Object dataVersion) throws Exception {
        RemotingSerializable wrapper = (RemotingSerializable) Rmq.newInstance(Rmq.TOPIC_CONFIG_WRAPPER);
        Rmq.invoke(wrapper, "setTopicConfigTable", table);
        Rmq.invoke(wrapper, "setDataVersion", dataVersion);
        BrokerConfigFile.persist(path, wrapper);
    }

    /** A subset of what TopicConfigManager's constructor creates (5.5.1 source), cluster topics switched off. */
    static List<TopicConfig> systemTopics() {
        return List.of(
            new TopicConfig("SELF_TEST_TOPIC", 1, 1, RW),
            new TopicConfig("TBW102", 8, 8, PermName.PERM_INHERIT | RW),
            new TopicConfig("BenchmarkTest", 1024, 1024, RW),
            new TopicConfig("DefaultCluster", 16, 16, PermName.PERM_INHERIT),
            new TopicConfig("broker-a", 1, 1, PermName.PERM_INHERIT | RW),
            new TopicConfig("OFFSET_MOVED_EVENT", 1, 1, RW),
            new TopicConfig("SCHEDULE_TOPIC_XXXX", 18, 18, RW),
            new TopicConfig("RMQ_SYS_TRANS_HALF_TOPIC", 1, 1, RW),
            new TopicConfig("RMQ_SYS_TRANS_OP_HALF_TOPIC", 1, 1, RW));
    }

    /** The golden stores' topics, plus every perm, filter type, sysflag and (5.x) attribute shape. */
    static List<TopicConfig> goldenTopics() throws Exception {
        TopicConfig order = new TopicConfig("OrderTopic", 8, 8, RW);
        order.setOrder(true);
        TopicConfig v6 = new TopicConfig("V6Topic", 2, 2, PermName.PERM_WRITE);
        v6.setTopicFilterType(TopicFilterType.MULTI_TAG);
        v6.setTopicSysFlag(TopicSysFlag.buildSysFlag(true, true));
        return List.of(
            attributes(new TopicConfig("TopicTest", 4, 4, RW), "message.type", "NORMAL"),
            attributes(order, "message.type", "FIFO"),
            new TopicConfig("NoTagTopic", 2, 2, RW),
            new TopicConfig("BigBodyTopic", 2, 2, PermName.PERM_READ),
            v6,
            new TopicConfig("%RETRY%golden_group", 1, 1, RW),
            new TopicConfig("ShrinkingTopic", 8, 4, RW),
            attributes(new TopicConfig("PriorityTopic", 4, 4, PermName.PERM_PRIORITY | RW),
                "cleanup.policy", "COMPACTION", "queue.type", "SimpleCQ"),
            new TopicConfig("LockedTopic", 1, 1, 0));
    }

    /** TopicConfig.setAttributes (5.x; 4.9.8 topics have no attributes). */
    static TopicConfig attributes(TopicConfig t, String... keyValues) throws Exception {
        if (Rmq.V5) {
            Rmq.invoke(t, "setAttributes", pairs(keyValues));
        }
        return t;
    }

    static List<Object> describeTopics(Map<String, TopicConfig> table) throws Exception {
        List<Object> out = new ArrayList<>();
        for (TopicConfig t : new TreeMap<>(table).values()) {
            Map<String, Object> d = new LinkedHashMap<>();
            d.put("topicName", t.getTopicName());
            d.put("readQueueNums", t.getReadQueueNums());
            d.put("writeQueueNums", t.getWriteQueueNums());
            d.put("perm", t.getPerm());
            d.put("perm2String", PermName.perm2String(t.getPerm()));
            d.put("topicFilterType", t.getTopicFilterType().name());
            d.put("topicSysFlag", t.getTopicSysFlag());
            d.put("order", t.isOrder());
            Object attributes = Rmq.getter(t, "getAttributes");       // 5.x
            if (attributes != null) {
                d.put("attributes", new TreeMap<>((Map<?, ?>) attributes));
            }
            out.add(d);
        }
        return out;
    }

    // ------------------------------------------------------------------------------------------ groups

    static Map<String, Object> groups(String path) throws Exception {
        ConcurrentMap<String, Object> table = new ConcurrentHashMap<>(1024);
        ConcurrentMap<String, ConcurrentMap<String, Integer>> forbidden = new ConcurrentHashMap<>(4);
        Object dataVersion = Rmq.newInstance(Rmq.DATA_VERSION);
        Groups manager = Rmq.V5 ? new GroupsV5(path, table, forbidden, dataVersion) : new Groups(path, table, dataVersion);
        Map<String, Object> out = new LinkedHashMap<>();
        for (Object g : systemGroups()) {                      // SubscriptionGroupManager.init()
            table.put((String) Rmq.invoke(g, "getGroupName"), g);
        }
        manager.persist();
        out.put("bak", describeGroups(table, forbidden));
        for (Object g : goldenGroups()) {                      // updateSubscriptionGroupConfig
            table.put((String) Rmq.invoke(g, "getGroupName"), g);
            Rmq.invoke(dataVersion, "nextVersion");
        }
        if (Rmq.V5) {                                          // updateForbidden (bits by index)
            forbid(forbidden, dataVersion, "golden_beyond_max", "TopicTest", 1 | 1 << 2);
            forbid(forbidden, dataVersion, "golden_forbidden_only", "OrderTopic", 1 << 1);   // a group not in the table
        }
        manager.persist();
        out.put("current", describeGroups(table, forbidden));
        return out;
    }

    static List<Object> systemGroups() throws Exception {
        List<Object> out = new ArrayList<>(List.of(group(MixAll.TOOLS_CONSUMER_GROUP),
            group(MixAll.FILTERSRV_CONSUMER_GROUP), group(MixAll.SELF_TEST_CONSUMER_GROUP)));
        for (String name : new String[] {MixAll.ONS_HTTP_PROXY_GROUP, MixAll.CID_ONSAPI_PULL_GROUP,
            MixAll.CID_ONSAPI_PERMISSION_GROUP, MixAll.CID_ONSAPI_OWNER_GROUP}) {
            out.add(group(name, "consumeBroadcastEnable", true));
        }
        if (Rmq.V5) {
            out.add(group(MixAll.CID_SYS_RMQ_TRANS, "consumeBroadcastEnable", true));
        }
        return out;
    }

    /** The golden consumer-offsets groups, each with other settings (5.x-only ones are left out on 4.9.8). */
    static List<Object> goldenGroups() throws Exception {
        return List.of(
            group("golden_in_range"),
            group("golden_below_min", "consumeFromMinEnable", false, "retryMaxTimes", 3),
            group("golden_beyond_max", "consumeEnable", false),
            group("golden_caught_up", "consumeBroadcastEnable", false, "consumeMessageOrderly", true),
            group("golden_group", "retryQueueNums", 2, "brokerId", 1L, "whichBrokerWhenConsumeSlowly", 2L,
                "notifyConsumerIdsChangedEnable", false, "groupSysFlag", 1, "consumeTimeoutMinute", 30,
                "attributes", pairs("priority.factor", "50")),
            group("golden_ghost", "retryMaxTimes", -1));
    }

    /** A SubscriptionGroupConfig (RocketMQ's own class) with the given field values, through its setters. */
    static Object group(String name, Object... settings) throws Exception {
        Object g = Rmq.newInstance(Rmq.SUBSCRIPTION_GROUP_CONFIG);
        Rmq.invoke(g, "setGroupName", name);
        for (int i = 0; i < settings.length; i += 2) {
            String field = (String) settings[i];
            if (Rmq.V5 || !V5_GROUP_FIELDS.contains(field)) {
                Rmq.invoke(g, "set" + Character.toUpperCase(field.charAt(0)) + field.substring(1), settings[i + 1]);
            }
        }
        return g;
    }

    /** SubscriptionGroupManager.updateForbiddenValue: group -> topic -> bits, and a new data version. */
    static void forbid(ConcurrentMap<String, ConcurrentMap<String, Integer>> forbidden, Object dataVersion,
                       String group, String topic, int bits) throws Exception {
        forbidden.computeIfAbsent(group, k -> new ConcurrentHashMap<>()).put(topic, bits);
        Rmq.invoke(dataVersion, "nextVersion");
    }

    static Map<String, Object> describeGroups(Map<String, Object> table,
                                              Map<String, ConcurrentMap<String, Integer>> forbidden) throws Exception {
        List<Object> groups = new ArrayList<>();
        for (Object g : new TreeMap<>(table).values()) {
            Map<String, Object> d = new LinkedHashMap<>();
            for (String field : GROUP_FIELDS) {
                String suffix = Character.toUpperCase(field.charAt(0)) + field.substring(1);
                Object value = Rmq.has(g, "is" + suffix, 0) ? Rmq.invoke(g, "is" + suffix) : Rmq.getter(g, "get" + suffix);
                if (value instanceof Map) {
                    value = new TreeMap<>((Map<?, ?>) value);
                }
                if (value != null) {
                    d.put(field, value);
                }
            }
            groups.add(d);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("groups", groups);
        if (Rmq.V5) {
            Map<String, Object> f = new TreeMap<>();
            forbidden.forEach((group, topics) -> f.put(group, new TreeMap<>(topics)));
            out.put("forbidden", f);
        }
        return out;
    }

    /** Mirrors 4.9.8 SubscriptionGroupManager: subscriptionGroupTable and dataVersion are its public getters. */
    public static class Groups extends BrokerConfigFile {
        private final ConcurrentMap<String, Object> subscriptionGroupTable;
        private final Object dataVersion;

        Groups(String path, ConcurrentMap<String, Object> subscriptionGroupTable, Object dataVersion) {
            super(path);
            this.subscriptionGroupTable = subscriptionGroupTable;
            this.dataVersion = dataVersion;
        }

        public ConcurrentMap<String, Object> getSubscriptionGroupTable() {
            return subscriptionGroupTable;
        }

        public Object getDataVersion() {
            return dataVersion;
        }
    }

    /** Mirrors 5.x SubscriptionGroupManager: also forbiddenTable (group -> topic -> forbidden bits). */
    public static final class GroupsV5 extends Groups {
        private final ConcurrentMap<String, ConcurrentMap<String, Integer>> forbiddenTable;

        GroupsV5(String path, ConcurrentMap<String, Object> subscriptionGroupTable,
                 ConcurrentMap<String, ConcurrentMap<String, Integer>> forbiddenTable, Object dataVersion) {
            super(path, subscriptionGroupTable, dataVersion);
            this.forbiddenTable = forbiddenTable;
        }

        public ConcurrentMap<String, ConcurrentMap<String, Integer>> getForbiddenTable() {
            return forbiddenTable;
        }
    }

    // ----------------------------------------------------------------------------------- delay offsets

    /** 5.x: the file ScheduleMessageService persists; first with nothing delivered (all 0), then {@code given}. */
    static Map<String, Object> writeDelayOffsets(String path, Map<Integer, Long> given) throws Exception {
        ConcurrentMap<Integer, Long> offsets = new ConcurrentHashMap<>(32);
        Object dataVersion = Rmq.newInstance(Rmq.DATA_VERSION);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("written_by", "the generator, as 5.x ScheduleMessageService.encode (DelayOffsetSerializeWrapper with dataVersion)");
        given.keySet().forEach(level -> offsets.put(level, 0L));
        BrokerConfigFile.persist(path, new DelayOffsetsV5(offsets, dataVersion));
        out.put("bak", new TreeMap<>(offsets));
        offsets.putAll(given);
        Rmq.invoke(dataVersion, "nextVersion");
        BrokerConfigFile.persist(path, new DelayOffsetsV5(offsets, dataVersion));
        out.put("current", new TreeMap<>(offsets));
        return out;
    }

    /** 4.9.8: the file and its .bak as RocketMQ's ScheduleMessageService.decode reads them. */
    static Map<String, Object> readDelayOffsets(Path path) throws Exception {
        Class<?> wrapper = Class.forName("org.apache.rocketmq.store.schedule.DelayOffsetSerializeWrapper");
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("written_by", "RocketMQ 4.9.8's own ScheduleMessageService during the store run; read back with its "
            + "DelayOffsetSerializeWrapper.fromJson");
        out.put("bak", new TreeMap<>((Map<?, ?>) Rmq.invoke(RemotingSerializable.fromJson(
            Files.readString(path.resolveSibling(path.getFileName() + ".bak"), StandardCharsets.UTF_8), wrapper),
            "getOffsetTable")));
        out.put("current", new TreeMap<>((Map<?, ?>) Rmq.invoke(RemotingSerializable.fromJson(
            Files.readString(path, StandardCharsets.UTF_8), wrapper), "getOffsetTable")));
        return out;
    }

    /** Mirrors 5.x DelayOffsetSerializeWrapper (a rocketmq-broker class): offsetTable and dataVersion. */
    public static final class DelayOffsetsV5 extends RemotingSerializable {
        private final ConcurrentMap<Integer, Long> offsetTable;
        private final Object dataVersion;

        DelayOffsetsV5(ConcurrentMap<Integer, Long> offsetTable, Object dataVersion) {
            this.offsetTable = offsetTable;
            this.dataVersion = dataVersion;
        }

        public ConcurrentMap<Integer, Long> getOffsetTable() {
            return offsetTable;
        }

        public Object getDataVersion() {
            return dataVersion;
        }
    }

    // ------------------------------------------------------------------------------------------ shared

    static Map<String, String> pairs(String... keyValues) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < keyValues.length; i += 2) {
            m.put(keyValues[i], keyValues[i + 1]);
        }
        return m;
    }
}
