package io.rocketstore.golden;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;

import com.alibaba.fastjson2.JSON;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.apache.rocketmq.broker.config.v2.ConfigHelper;
import org.apache.rocketmq.broker.config.v2.ConfigStorage;
import org.apache.rocketmq.broker.config.v2.RecordPrefix;
import org.apache.rocketmq.broker.config.v2.SerializationType;
import org.apache.rocketmq.broker.config.v2.TableId;
import org.apache.rocketmq.broker.config.v2.TablePrefix;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.config.AbstractRocksDBStorage;
import org.apache.rocketmq.remoting.protocol.DataVersion;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.rocksdb.RocksIterator;
import org.rocksdb.WriteBatch;

/**
 * Golden v2 RocksDB config (RocketMQ 5.5.1 broker with configManagerVersion=v2): every config table in one
 * database, config/rdb/, written by the broker's own ConfigStorage with the keys and values of
 * TopicConfigManagerV2 / SubscriptionGroupManagerV2 / ConsumerOffsetManagerV2 (ConfigHelper.keyBufOf, valueBufOf,
 * stampDataVersion are RocketMQ's; the managers need a running BrokerController, so the lines of their
 * updateTopicConfig, removeTopicConfig, updateSubscriptionGroupConfig, commitOffset, commitPullOffset and
 * load that build or parse a key are repeated here):
 *
 *   key   [table prefix 1: 1 byte][table id: 2 bytes][record prefix: 1 byte = data 2 | data version 1] ...
 *         topics (3), groups (4): [name length: 2 bytes][name]; value [serialization 1 = JSON][JSON]
 *         consumer offsets (1), pull offsets (2): [group len: 2][group][0x01][topic len: 2][topic][0x01][queue id: 4];
 *         value [offset: 8 bytes]
 *         data version: "data_version" after the record prefix; value [state version: 8][timestamp: 8][counter: 8]
 *
 * Built only with -Drocksdb; run through RocksDBConfigGolden's main by tests/golden/regenerate.py --rocksdb-config:
 *
 *   write-v2 --store DIR                          system and golden topics and groups, an update, a delete, offsets
 *   view-v2  --store DIR --work SCRATCH --out FILE   what the v2 managers' load() reads back (on a copy)
 */
final class RocksDBConfigV2Golden {
    static final String REMOVED_TOPIC = "LockedTopic";
    /** (group, topic, queue, offset) committed: commitOffset; the %LMQ% one is kept only in RocksDB */
    static final Object[][] OFFSETS = {
        {"golden_in_range", "TopicTest", 0, 5L}, {"golden_in_range", "TopicTest", 1, 9L},
        {"golden_beyond_max", "TopicTest", 2, 500L}, {"golden_caught_up", "OrderTopic", 0, 8L},
        {"golden_in_range", "TopicTest", 0, 6L},                 // committed again: the last commit wins
        {"%LMQ%golden_lmq", "%LMQ%golden_lmq", 0, 3L}};
    static final Object[][] PULL_OFFSETS = {{"golden_in_range", "TopicTest", 0, 77L}};

    private RocksDBConfigV2Golden() {
    }

    static ConfigStorage open(String root) {
        MessageStoreConfig cfg = new MessageStoreConfig();
        cfg.setStorePathRootDir(root);
        ConfigStorage storage = new ConfigStorage(cfg);           // BrokerController: root/config/rdb
        if (!storage.start()) {
            throw new IllegalStateException("ConfigStorage refused " + root);
        }
        return storage;
    }

    static void write(String root) throws Exception {
        ConfigStorage storage = open(root);
        DataVersion topics = new DataVersion();
        DataVersion groups = new DataVersion();
        DataVersion offsets = new DataVersion();
        DataVersion pulls = new DataVersion();
        List<TopicConfig> all = new ArrayList<>(ConfigFiles.systemTopics());
        all.addAll(ConfigFiles.goldenTopics());
        all.add(new TopicConfig("ShrinkingTopic", 16, 16, ConfigFiles.RW));       // updated: the last put wins
        for (TopicConfig t : all) {                                             // updateTopicConfig
            put(storage, TableId.TOPIC, t.getTopicName(), t, topics);
        }
        ByteBuf key = ConfigHelper.keyBufOf(TableId.TOPIC, REMOVED_TOPIC);       // removeTopicConfig
        try (WriteBatch batch = new WriteBatch()) {
            batch.delete(ConfigHelper.readBytes(key));
            ConfigHelper.stampDataVersion(batch, TableId.TOPIC, topics, 0);
            storage.write(batch);
        } finally {
            key.release();
        }
        for (Object g : ConfigFiles.systemGroups()) {                           // updateSubscriptionGroupConfig
            put(storage, TableId.SUBSCRIPTION_GROUP, ((SubscriptionGroupConfig) g).getGroupName(), g, groups);
        }
        for (Object g : ConfigFiles.goldenGroups()) {
            put(storage, TableId.SUBSCRIPTION_GROUP, ((SubscriptionGroupConfig) g).getGroupName(), g, groups);
        }
        for (Object[] o : OFFSETS) {                                            // commitOffset
            commit(storage, TableId.CONSUMER_OFFSET, (String) o[0], (String) o[1], (Integer) o[2], (Long) o[3], offsets);
        }
        for (Object[] o : PULL_OFFSETS) {                                       // commitPullOffset
            commit(storage, TableId.PULL_OFFSET, (String) o[0], (String) o[1], (Integer) o[2], (Long) o[3], pulls);
        }
        storage.flushWAL();
        storage.shutdown();
        Generator.log("config/rdb written: " + all.size() + " topic puts, counters topics " + topics.getCounter()
            + ", groups " + groups.getCounter() + ", offsets " + offsets.getCounter());
    }

    static void put(ConfigStorage storage, TableId table, String name, Object config, DataVersion version) throws Exception {
        ByteBuf key = ConfigHelper.keyBufOf(table, name);
        ByteBuf value = ConfigHelper.valueBufOf(config, SerializationType.JSON);
        try (WriteBatch batch = new WriteBatch()) {
            batch.put(key.nioBuffer(), value.nioBuffer());
            ConfigHelper.stampDataVersion(batch, table, version, 0);
            storage.write(batch);
        } finally {
            key.release();
            value.release();
        }
    }

    /** ConsumerOffsetManagerV2.keyOfConsumerOffset / keyOfPullOffset and commitOffset's value. */
    static byte[] offsetKey(TableId table, String group, String topic, int queueId) {
        byte[] g = group.getBytes(StandardCharsets.UTF_8);
        byte[] t = topic.getBytes(StandardCharsets.UTF_8);
        ByteBuf key = Unpooled.buffer(1 + 2 + 1 + 2 + g.length + 1 + 2 + t.length + 1 + 4);
        key.writeByte(TablePrefix.TABLE.getValue());
        key.writeShort(table.getValue());
        key.writeByte(RecordPrefix.DATA.getValue());
        key.writeShort(g.length);
        key.writeBytes(g);
        key.writeByte(AbstractRocksDBStorage.CTRL_1);
        key.writeShort(t.length);
        key.writeBytes(t);
        key.writeByte(AbstractRocksDBStorage.CTRL_1);
        key.writeInt(queueId);
        return ConfigHelper.readBytes(key);
    }

    static void commit(ConfigStorage storage, TableId table, String group, String topic, int queueId, long offset,
                       DataVersion version) throws Exception {
        try (WriteBatch batch = new WriteBatch()) {
            batch.put(offsetKey(table, group, topic, queueId), ByteBuffer.allocate(8).putLong(0, offset).array());
            ConfigHelper.stampDataVersion(batch, table, version, 0);
            storage.write(batch);
        }
    }

    static void view(Generator.Args args) throws Exception {
        Path work = Paths.get(args.get("work"));
        Generator.deleteTree(work);
        Generator.copyTree(Paths.get(args.get("store")), work);
        ConfigStorage storage = open(work.toString());
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        out.put("config_manager_version", "v2");
        ConcurrentMap<String, TopicConfig> topicTable = new ConcurrentHashMap<>();
        for (byte[][] kv : scan(storage, TableId.TOPIC)) {                      // TopicConfigManagerV2.parseTopicConfig
            TopicConfig t = JSON.parseObject(json(kv[1]), TopicConfig.class);
            if (!name(kv[0]).equals(t.getTopicName())) {
                throw new IllegalStateException("topic key and name differ");
            }
            topicTable.put(t.getTopicName(), t);
        }
        out.put("topics_data_version_counter", counter(storage, TableId.TOPIC));
        out.put("topics", ConfigFiles.describeTopics(topicTable));
        Map<String, Object> groupTable = new ConcurrentHashMap<>();
        for (byte[][] kv : scan(storage, TableId.SUBSCRIPTION_GROUP)) {         // parseSubscription
            SubscriptionGroupConfig g = JSON.parseObject(json(kv[1]), SubscriptionGroupConfig.class);
            groupTable.put(g.getGroupName(), g);
        }
        out.put("subscription_groups_data_version_counter", counter(storage, TableId.SUBSCRIPTION_GROUP));
        out.put("subscription_groups", ConfigFiles.describeGroups(groupTable, new ConcurrentHashMap<>()));
        out.put("consumer_offsets_data_version_counter", counter(storage, TableId.CONSUMER_OFFSET));
        out.put("consumer_offsets", offsets(storage, TableId.CONSUMER_OFFSET));
        out.put("pull_offsets", offsets(storage, TableId.PULL_OFFSET));
        out.put("removed", List.of(REMOVED_TOPIC));
        storage.shutdown();
        Files.write(Paths.get(args.get("out")), Json.write(out).getBytes(StandardCharsets.UTF_8));
        Generator.deleteTree(work);
    }

    /** Every data record of a table: ConfigStorage.iterate over [prefix|table|DATA, prefix|table|DATA+1). */
    static List<byte[][]> scan(ConfigStorage storage, TableId table) {
        ByteBuffer begin = ByteBuffer.allocateDirect(4);
        begin.put(TablePrefix.TABLE.getValue()).putShort(table.getValue()).put(RecordPrefix.DATA.getValue()).flip();
        ByteBuffer end = ByteBuffer.allocateDirect(4);
        end.put(TablePrefix.TABLE.getValue()).putShort(table.getValue()).put((byte) (RecordPrefix.DATA.getValue() + 1)).flip();
        List<byte[][]> out = new ArrayList<>();
        try (RocksIterator it = storage.iterate(begin, end)) {
            while (it.isValid()) {
                out.add(new byte[][] {it.key(), it.value()});
                it.next();
            }
        }
        return out;
    }

    static String name(byte[] key) {
        ByteBuffer b = ByteBuffer.wrap(key);
        b.position(4);
        short len = b.getShort();
        return new String(key, 6, len, StandardCharsets.UTF_8);
    }

    static String json(byte[] value) {
        if (SerializationType.valueOf(value[0]) != SerializationType.JSON) {
            throw new IllegalStateException("not JSON");
        }
        return new String(value, 1, value.length - 1, StandardCharsets.UTF_8);
    }

    static long counter(ConfigStorage storage, TableId table) throws Exception {
        DataVersion v = new DataVersion();
        ConfigHelper.loadDataVersion(storage, table).ifPresent(buf -> ConfigHelper.onDataVersionLoad(buf, v));
        return v.getCounter().get();
    }

    /** ConsumerOffsetManagerV2.loadConsumerOffsets' parse: [(group, topic, queue id, offset)], in key order. */
    static List<Object> offsets(ConfigStorage storage, TableId table) {
        List<Object> out = new ArrayList<>();
        for (byte[][] kv : scan(storage, table)) {
            ByteBuffer k = ByteBuffer.wrap(kv[0]);
            k.position(4);
            byte[] group = new byte[k.getShort()];
            k.get(group);
            k.get();
            byte[] topic = new byte[k.getShort()];
            k.get(topic);
            k.get();
            int queueId = k.getInt();
            long offset = ByteBuffer.wrap(kv[1]).getLong();
            out.add(List.of(new String(group, StandardCharsets.UTF_8), new String(topic, StandardCharsets.UTF_8),
                queueId, offset));
        }
        return out;
    }
}
