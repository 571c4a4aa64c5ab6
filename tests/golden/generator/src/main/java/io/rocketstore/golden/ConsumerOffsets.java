package io.rocketstore.golden;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;

/**
 * config/consumerOffset.json, written exactly the way the broker's ConsumerOffsetManager writes it.
 *
 * rocketmq-broker 4.9.8 is not on Maven Central, so the broker class itself cannot be used (see
 * BrokerConfigFile). What decides the bytes is RocketMQ's own ConfigManager.persist() and
 * RemotingSerializable.toJson(this, true), which serialises every public getter (fastjson in 4.9.8,
 * fastjson2 in 5.x). These beans therefore carry the same fields and public getters as
 * ConsumerOffsetManager of each line (checked with javap against rocketmq-broker-5.5.1.jar and the 4.9.8
 * source), so RocketMQ's serialiser produces the same text.
 */
final class ConsumerOffsets {
    private ConsumerOffsets() {
    }

    static BrokerConfigFile create(String path, Map<String, Map<Integer, Long>> table) throws Exception {
        ConcurrentMap<String, ConcurrentMap<Integer, Long>> offsets = new ConcurrentHashMap<>(512);
        table.forEach((k, v) -> offsets.put(k, new ConcurrentHashMap<>(v)));
        if (Rmq.V5) {
            return new V5(path, offsets, Rmq.newInstance(Rmq.DATA_VERSION));
        }
        return new V4(path, offsets);
    }

    /** Mirrors 4.9.8 ConsumerOffsetManager: offsetTable is the only public getter. */
    public static final class V4 extends BrokerConfigFile {
        private ConcurrentMap<String, ConcurrentMap<Integer, Long>> offsetTable;

        V4(String path, ConcurrentMap<String, ConcurrentMap<Integer, Long>> offsetTable) {
            super(path);
            this.offsetTable = offsetTable;
        }

        public ConcurrentMap<String, ConcurrentMap<Integer, Long>> getOffsetTable() {
            return offsetTable;
        }
    }

    /**
     * Mirrors 5.x ConsumerOffsetManager: dataVersion, offsetTable, the derived groupTopicMap, and a
     * transient pullOffsetTable whose getter fastjson2 skips (its field is transient).
     */
    public static final class V5 extends BrokerConfigFile {
        protected Object dataVersion;
        protected ConcurrentMap<String, ConcurrentMap<Integer, Long>> offsetTable;
        private final transient ConcurrentMap<String, ConcurrentMap<Integer, Long>> pullOffsetTable =
            new ConcurrentHashMap<>(512);

        V5(String path, ConcurrentMap<String, ConcurrentMap<Integer, Long>> offsetTable, Object dataVersion) {
            super(path);
            this.offsetTable = offsetTable;
            this.dataVersion = dataVersion;
        }

        public Object getDataVersion() {
            return dataVersion;
        }

        public ConcurrentMap<String, ConcurrentMap<Integer, Long>> getOffsetTable() {
            return offsetTable;
        }

        public ConcurrentMap<String, ConcurrentMap<Integer, Long>> getPullOffsetTable() {
            return pullOffsetTable;
        }

        /** Same derivation as ConsumerOffsetManager.getGroupTopicMap: group -> topics with an offset. */
        public Map<String, Set<String>> getGroupTopicMap() {
            Map<String, Set<String>> result = new HashMap<>(offsetTable.size());
            for (String key : offsetTable.keySet()) {
                String[] topicGroup = key.split("@");
                if (topicGroup.length == 2) {
                    result.computeIfAbsent(topicGroup[1], k -> new HashSet<>()).add(topicGroup[0]);
                }
            }
            return result;
        }
    }
}
