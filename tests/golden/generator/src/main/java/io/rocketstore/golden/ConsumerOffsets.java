package io.rocketstore.golden;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;

import org.apache.rocketmq.common.ConfigManager;
import org.apache.rocketmq.remoting.protocol.RemotingSerializable;

/**
 * config/consumerOffset.json, written exactly the way the broker's ConsumerOffsetManager writes it.
 *
 * rocketmq-broker 4.9.8 is not on Maven Central, so the broker class itself cannot be used. What decides
 * the bytes is (1) RocketMQ's own ConfigManager.persist() (the .bak / .tmp write protocol of
 * MixAll.string2File) and (2) RemotingSerializable.toJson(this, true), which serialises every public getter
 * (fastjson in 4.9.8, fastjson2 in 5.x). These beans therefore carry the same fields and public getters as
 * ConsumerOffsetManager of each line (checked with javap against rocketmq-broker-5.5.1.jar and the 4.9.8
 * source), so RocketMQ's serialiser produces the same text.
 */
final class ConsumerOffsets {
    private ConsumerOffsets() {
    }

    static ConfigManager create(String path, Map<String, Map<Integer, Long>> table) throws Exception {
        ConcurrentMap<String, ConcurrentMap<Integer, Long>> offsets = new ConcurrentHashMap<>(512);
        table.forEach((k, v) -> offsets.put(k, new ConcurrentHashMap<>(v)));
        if (Rmq.V5) {
            Object dataVersion = Class.forName("org.apache.rocketmq.remoting.protocol.DataVersion")
                .getConstructor().newInstance();
            return new V5(path, offsets, dataVersion);
        }
        return new V4(path, offsets);
    }

    /** Mirrors 4.9.8 ConsumerOffsetManager: offsetTable is the only public getter. */
    public static final class V4 extends ConfigManager {
        private final transient String path;
        private ConcurrentMap<String, ConcurrentMap<Integer, Long>> offsetTable;

        V4(String path, ConcurrentMap<String, ConcurrentMap<Integer, Long>> offsetTable) {
            this.path = path;
            this.offsetTable = offsetTable;
        }

        public ConcurrentMap<String, ConcurrentMap<Integer, Long>> getOffsetTable() {
            return offsetTable;
        }

        @Override
        public String encode() {
            return encode(false);
        }

        @Override
        public String encode(boolean prettyFormat) {
            return RemotingSerializable.toJson(this, prettyFormat);
        }

        @Override
        public String configFilePath() {
            return path;
        }

        @Override
        public void decode(String jsonString) {
            throw new UnsupportedOperationException("writer only");
        }
    }

    /**
     * Mirrors 5.x ConsumerOffsetManager: dataVersion, offsetTable, the derived groupTopicMap, and a
     * transient pullOffsetTable whose getter fastjson2 skips (its field is transient).
     */
    public static final class V5 extends ConfigManager {
        private final transient String path;
        protected Object dataVersion;
        protected ConcurrentMap<String, ConcurrentMap<Integer, Long>> offsetTable;
        private final transient ConcurrentMap<String, ConcurrentMap<Integer, Long>> pullOffsetTable =
            new ConcurrentHashMap<>(512);

        V5(String path, ConcurrentMap<String, ConcurrentMap<Integer, Long>> offsetTable, Object dataVersion) {
            this.path = path;
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

        @Override
        public String encode() {
            return encode(false);
        }

        @Override
        public String encode(boolean prettyFormat) {
            return RemotingSerializable.toJson(this, prettyFormat);
        }

        @Override
        public String configFilePath() {
            return path;
        }

        @Override
        public void decode(String jsonString) {
            throw new UnsupportedOperationException("writer only");
        }
    }
}
