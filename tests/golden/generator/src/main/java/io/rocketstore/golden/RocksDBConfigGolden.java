package io.rocketstore.golden;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONObject;
import com.alibaba.fastjson2.JSONWriter;
import org.apache.rocketmq.broker.config.v1.RocksDBConfigManager;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.rocksdb.CompressionType;

/**
 * Golden v1 RocksDB config (RocketMQ 5.5.1 broker, configManagerVersion v1 with the RocksDB config managers):
 * topics and subscription groups written to RocksDB by the broker's own v1 RocksDBConfigManager, with the keys
 * and values RocksDBTopicConfigManager.putTopicConfig / removeTopicConfig and RocksDBSubscriptionGroupManager
 * .putSubscriptionGroupConfig / updateForbidden build (those managers need a running BrokerController, so
 * their few lines are repeated here, as RocksDBGolden does for the consumer offsets):
 *
 *   separate databases (default):  config/topics/ and config/subscriptionGroups/, column families "default"
 *                                   (key name, value JSON) and "kvDataVersion"; groups also "forbidden"
 *   --single (useSingleRocksDBForAllConfigs): config/metadata/, column families "topic"/"topicVersion",
 *                                   "subscriptionGroup"/"subscriptionGroupVersion" and "forbidden"
 *
 * Built only with -Drocksdb; run by tests/golden/regenerate.py --rocksdb-config:
 *
 *   write --store DIR [--single]              the system topics and groups, the golden ones, an update, a delete
 *   write-v2, view-v2: the same for v2's config/rdb (RocksDBConfigV2Golden)
 *   view  --store DIR [--single] --work SCRATCH --out FILE  what the managers load back: RocksDBConfigManager.loadDataVersion
 *                                             and loadData with the managers' decodeTopicConfig /
 *                                             decodeSubscriptionGroup / decodeForbidden (read-only open)
 */
final class RocksDBConfigGolden {
    static final String FORBIDDEN_CF = "forbidden";
    /** a topic and a group put, then removed (removeTopicConfig / removeSubscriptionGroupConfig: a delete) */
    static final String REMOVED_TOPIC = "LockedTopic";
    static final String REMOVED_GROUP = "golden_ghost";

    private RocksDBConfigGolden() {
    }

    public static void main(String[] argv) throws Exception {
        Generator.Args args = new Generator.Args(argv);
        Generator.log("RocketMQ " + Rmq.version() + " RocksDB config: " + String.join(" ", argv));
        int status = 0;
        try {
            switch (args.command) {
                case "write": write(args); break;
                case "view": view(args); break;
                case "write-v2": RocksDBConfigV2Golden.write(args.get("store")); break;     // config/rdb (v2)
                case "view-v2": RocksDBConfigV2Golden.view(args); break;
                default: throw new IllegalArgumentException("unknown command " + args.command);
            }
        } catch (Exception | Error e) {
            e.printStackTrace();
            status = 1;
        }
        System.exit(status);
    }

    /** The managers' RocksDBConfigManager: RocksDBTopicConfigManager's / RocksDBSubscriptionGroupManager's constructor. */
    static RocksDBConfigManager manager(String store, boolean single, boolean topics) {
        Path config = Paths.get(store, "config");
        if (single) {
            return new RocksDBConfigManager(config.resolve("metadata").toString(), 60_000,
                CompressionType.LZ4_COMPRESSION, topics ? "topic" : "subscriptionGroup",
                topics ? "topicVersion" : "subscriptionGroupVersion");
        }
        return new RocksDBConfigManager(config.resolve(topics ? "topics" : "subscriptionGroups").toString(), 60_000,
            CompressionType.LZ4_COMPRESSION);
    }

    static void write(Generator.Args args) throws Exception {
        String store = args.get("store");
        boolean single = args.has("single");
        RocksDBConfigManager topics = manager(store, single, true);
        if (!topics.init() || !topics.loadDataVersion()) {
            throw new IllegalStateException("RocksDBConfigManager refused the topics database");
        }
        for (TopicConfig t : ConfigFiles.systemTopics()) {     // TopicConfigManager's constructor, then persist
            putTopic(topics, t);
        }
        topics.updateKvDataVersion();
        for (TopicConfig t : ConfigFiles.goldenTopics()) {     // updateTopicConfig: put, next data version
            putTopic(topics, t);
            topics.updateKvDataVersion();
        }
        TopicConfig grown = new TopicConfig("ShrinkingTopic", 16, 16, ConfigFiles.RW);   // updated: the last put wins
        putTopic(topics, grown);
        topics.updateKvDataVersion();
        topics.delete(REMOVED_TOPIC.getBytes(StandardCharsets.UTF_8));                  // deleteTopicConfig
        topics.updateKvDataVersion();
        topics.flushWAL();
        topics.stop();

        RocksDBConfigManager groups = manager(store, single, false);
        if (!groups.init() || !groups.loadDataVersion()) {
            throw new IllegalStateException("RocksDBConfigManager refused the subscription groups database");
        }
        for (Object g : ConfigFiles.systemGroups()) {
            putGroup(groups, (SubscriptionGroupConfig) g);
        }
        groups.updateKvDataVersion();
        for (Object g : ConfigFiles.goldenGroups()) {
            putGroup(groups, (SubscriptionGroupConfig) g);
            groups.updateKvDataVersion();
        }
        groups.delete(REMOVED_GROUP.getBytes(StandardCharsets.UTF_8));                  // deleteSubscriptionGroupConfig
        groups.updateKvDataVersion();
        // updateForbidden: the group's whole topic -> bits map, JSON.toJSONString, into column family "forbidden"
        ConcurrentMap<String, ConcurrentMap<String, Integer>> forbidden = new ConcurrentHashMap<>();
        forbid(groups, forbidden, "golden_beyond_max", "TopicTest", 1 | 1 << 2);
        forbid(groups, forbidden, "golden_beyond_max", "OrderTopic", 1 << 3);
        forbid(groups, forbidden, "golden_forbidden_only", "OrderTopic", 1 << 1);       // a group not in the table
        groups.flushWAL();
        groups.stop();
        Generator.log("topics and groups written (" + (single ? "config/metadata" : "config/topics, config/subscriptionGroups") + ")");
    }

    static void putTopic(RocksDBConfigManager m, TopicConfig t) throws Exception {
        m.put(t.getTopicName().getBytes(StandardCharsets.UTF_8), JSON.toJSONBytes(t, JSONWriter.Feature.BrowserCompatible));
    }

    static void putGroup(RocksDBConfigManager m, SubscriptionGroupConfig g) throws Exception {
        m.put(g.getGroupName().getBytes(RocksDBConfigManager.CHARSET), JSON.toJSONBytes(g, JSONWriter.Feature.BrowserCompatible));
    }

    static void forbid(RocksDBConfigManager m, ConcurrentMap<String, ConcurrentMap<String, Integer>> forbidden,
                       String group, String topic, int bits) throws Exception {
        forbidden.computeIfAbsent(group, k -> new ConcurrentHashMap<>()).put(topic, bits);
        m.put(FORBIDDEN_CF, group, JSON.toJSONString(forbidden.get(group)));
    }

    static void view(Generator.Args args) throws Exception {
        Path work = Paths.get(args.get("work"));             // a copy: RocksDB writes its info LOG even read-only
        Generator.deleteTree(work);
        Generator.copyTree(Paths.get(args.get("store")), work);
        String store = work.toString();
        boolean single = args.has("single");
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        out.put("use_single_rocksdb_for_all_configs", single);

        RocksDBConfigManager topics = manager(store, single, true);
        if (!topics.init(true) || !topics.loadDataVersion()) {
            throw new IllegalStateException("RocksDBConfigManager refused the topics database read-only");
        }
        ConcurrentMap<String, TopicConfig> topicTable = new ConcurrentHashMap<>(1024);
        if (!topics.loadData((key, body) ->              // RocksDBTopicConfigManager.decodeTopicConfig
            topicTable.put(new String(key, StandardCharsets.UTF_8), JSON.parseObject(body, TopicConfig.class)))) {
            throw new IllegalStateException("loadData failed on the topics database");
        }
        out.put("topics_data_version_counter", topics.getKvDataVersion().getCounter().get());
        out.put("topics", ConfigFiles.describeTopics(topicTable));
        topics.stop();

        RocksDBConfigManager groups = manager(store, single, false);
        if (!groups.init(true) || !groups.loadDataVersion()) {
            throw new IllegalStateException("RocksDBConfigManager refused the subscription groups database read-only");
        }
        Map<String, Object> groupTable = new ConcurrentHashMap<>(1024);
        if (!groups.loadData((key, body) ->              // RocksDBSubscriptionGroupManager.decodeSubscriptionGroup
            groupTable.put(new String(key, RocksDBConfigManager.CHARSET), JSON.parseObject(body, SubscriptionGroupConfig.class)))) {
            throw new IllegalStateException("loadData failed on the subscription groups database");
        }
        ConcurrentMap<String, ConcurrentMap<String, Integer>> forbidden = new ConcurrentHashMap<>();
        groups.configRocksDBStorage.iterate(FORBIDDEN_CF, (key, body) -> {   // decodeForbidden
            JSONObject json = JSON.parseObject(new String(body, RocksDBConfigManager.CHARSET));
            Set<Map.Entry<String, Object>> entries = json.entrySet();
            ConcurrentMap<String, Integer> bits = new ConcurrentHashMap<>(entries.size());
            for (Map.Entry<String, Object> e : entries) {
                bits.put(e.getKey(), (Integer) e.getValue());
            }
            forbidden.put(new String(key, RocksDBConfigManager.CHARSET), bits);
        });
        out.put("subscription_groups_data_version_counter", groups.getKvDataVersion().getCounter().get());
        out.put("subscription_groups", ConfigFiles.describeGroups(groupTable, forbidden));
        groups.stop();
        out.put("removed", List.of(REMOVED_TOPIC, REMOVED_GROUP));
        java.nio.file.Files.write(Paths.get(args.get("out")), Json.write(out).getBytes(StandardCharsets.UTF_8));
        Generator.deleteTree(work);
    }
}
