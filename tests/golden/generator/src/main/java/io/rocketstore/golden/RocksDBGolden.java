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
import com.alibaba.fastjson2.JSONWriter;
import org.apache.rocketmq.broker.config.v1.RocksDBConfigManager;
import org.apache.rocketmq.broker.config.v1.RocksDBOffsetSerializeWrapper;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.RocksDBMessageStore;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.queue.ConsumeQueueInterface;
import org.apache.rocketmq.store.queue.CqUnit;
import org.apache.rocketmq.store.queue.RocksDBConsumeQueueStore;
import org.apache.rocketmq.store.stats.BrokerStatsManager;
import org.rocksdb.CompressionType;
import org.rocksdb.WriteBatch;

/**
 * Golden stores of RocketMQ 5.5's RocksDB ConsumeQueue (storeType=defaultRocksDB): RocketMQ's own
 * RocksDBMessageStore writes the CommitLog and its RocksDBConsumeQueueStore the queues (consumequeue/ is then a
 * RocksDB database, column families "default" and "offset"); consumer offsets go to config/consumerOffsets/
 * through the broker's own v1 RocksDBConfigManager, with the value RocksDBConsumerOffsetManager.putWriteBatch
 * builds (that manager needs a running BrokerController, so its five lines are repeated here).
 *
 * Built only with -Drocksdb (pom profile "rocksdb": RocketMQ 5.5.1 and the rocketmq-broker jar); run by
 * tests/golden/regenerate.py --rocksdb:
 *
 *   write  --store DIR --mode clean|crash   phase A, CQ flushed (as the flush service does), phase B; crash halts
 *   offsets --store DIR --set topic@group/queue=offset ...
 *   view   --store DIR --work SCRATCH --out FILE   RocketMQ's view: as stored (the ConsumeQueue store opened
 *          alone, no CommitLog recovery) and after a real load() (recovery) on a copy
 */
final class RocksDBGolden {
    static final int MESSAGES = 260;
    static final String[] TOPICS = {"TopicTest", "OrderTopic", "NoTagTopic", "V6Topic", "BigBodyTopic",
        "%RETRY%golden_group", Generator.LONG_RETRY_TOPIC, Generator.SCHEDULE_TOPIC, Generator.HALF_TOPIC,
        Generator.OP_HALF_TOPIC};

    private RocksDBGolden() {
    }

    public static void main(String[] argv) throws Exception {
        Generator.Args args = new Generator.Args(argv);
        Generator.log("RocketMQ " + Rmq.version() + " RocksDB: " + String.join(" ", argv));
        int status = 0;
        try {
            switch (args.command) {
                case "write": write(args); break;
                case "offsets": offsets(args); break;
                case "view": view(args); break;
                default: throw new IllegalArgumentException("unknown command " + args.command);
            }
        } catch (Exception | Error e) {
            e.printStackTrace();
            status = 1;
        }
        System.exit(status);
    }

    static MessageStoreConfig config(String root) {
        MessageStoreConfig cfg = Generator.config(root);
        cfg.setStoreType("defaultRocksDB");
        return cfg;
    }

    static DefaultMessageStore newStore(MessageStoreConfig cfg) throws Exception {
        BrokerConfig brokerConfig = new BrokerConfig();
        brokerConfig.setLongPollingEnable(false);
        return new RocksDBMessageStore(cfg, new BrokerStatsManager("golden", false), null, brokerConfig,
            new ConcurrentHashMap<>());
    }

    static void write(Generator.Args args) throws Exception {
        boolean crash = args.get("mode").equals("crash");
        MessageStoreConfig cfg = config(args.get("store"));
        DefaultMessageStore store = newStore(cfg);
        if (!store.load()) {
            throw new IllegalStateException("RocketMQ refused to load " + cfg.getStorePathRootDir());
        }
        store.start();
        Generator.Writer w = new Generator.Writer(store);
        int a = MESSAGES * 7 / 10;
        for (int i = 0; i < a; i++) {
            w.emit(i);
        }
        waitQueues(store);
        store.getQueueStore().flush();            // memtables to SST: RocksDB CQ writes go without a WAL
        for (int i = a; i < MESSAGES; i++) {
            w.emit(i);
        }
        Generator.waitDispatched(store);
        waitQueues(store);
        Generator.log("wrote " + w.records + " records, CommitLog max offset " + store.getMaxPhyOffset()
            + ", max physical offset in RocksDB " + ((RocksDBConsumeQueueStore) store.getQueueStore()).getMaxPhyOffsetInConsumeQueue());
        if (crash) {
            Generator.log("halting without shutdown");
            Runtime.getRuntime().halt(0);
        }
        store.shutdown();
    }

    /** Until the group-commit service has put every dispatched record into RocksDB. */
    static void waitQueues(DefaultMessageStore store) throws Exception {
        Generator.waitDispatched(store);
        long deadline = System.currentTimeMillis() + 60_000;
        while (((RocksDBConsumeQueueStore) store.getQueueStore()).getMaxPhyOffsetInConsumeQueue() < store.getMaxPhyOffset()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("RocksDB ConsumeQueue did not catch up within 60 s");
            }
            Thread.sleep(50);
        }
    }

    /** config/consumerOffsets/ through the broker's v1 RocksDBConfigManager (separate database, default CF). */
    static void offsets(Generator.Args args) throws Exception {
        Path db = Paths.get(args.get("store"), "config", "consumerOffsets");
        RocksDBConfigManager manager = new RocksDBConfigManager(db.toString(), 60_000, CompressionType.LZ4_COMPRESSION);
        if (!manager.init() || !manager.loadDataVersion()) {
            throw new IllegalStateException("RocksDBConfigManager refused " + db);
        }
        Map<String, ConcurrentMap<Integer, Long>> table = new LinkedHashMap<>();
        for (String s : args.all("set")) {            // topic@group/queue=offset
            int slash = s.lastIndexOf('/');
            int eq = s.lastIndexOf('=');
            table.computeIfAbsent(s.substring(0, slash), k -> new ConcurrentHashMap<>())
                .put(Integer.parseInt(s.substring(slash + 1, eq)), Long.parseLong(s.substring(eq + 1)));
        }
        try (WriteBatch batch = new WriteBatch()) {
            for (Map.Entry<String, ConcurrentMap<Integer, Long>> e : table.entrySet()) {
                RocksDBOffsetSerializeWrapper wrapper = new RocksDBOffsetSerializeWrapper();
                wrapper.setOffsetTable(e.getValue());
                manager.writeBatchPutOperation(batch, e.getKey().getBytes(StandardCharsets.UTF_8),
                    JSON.toJSONBytes(wrapper, JSONWriter.Feature.BrowserCompatible));
            }
            manager.batchPutWithWal(batch);
        }
        manager.updateKvDataVersion();
        manager.flushWAL();
        manager.stop();
        Generator.log("consumer offsets: " + table.size() + " topic@group keys in " + db);
    }

    static void view(Generator.Args args) throws Exception {
        Path storeDir = Paths.get(args.get("store"));
        Path work = Paths.get(args.get("work"));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        out.put("abort_present", Files.exists(storeDir.resolve("abort")));
        // two copies: the stored view's store keeps its rocksdbstore/ open (RocksDB's lock is per path)
        out.put("stored", stored(storeDir, work.resolve("stored")));
        out.put("recovery", recovered(storeDir, work.resolve("recovered")));
        Files.write(Paths.get(args.get("out")), Json.write(out).getBytes(StandardCharsets.UTF_8));
        Generator.deleteTree(work);
    }

    /**
     * The database as written: RocketMQ's RocksDBConsumeQueueStore opened on a copy by itself (no CommitLog
     * loaded, so no recovery): getMaxPhyOffsetInConsumeQueue, and per queue getMaxOffsetInQueue and every unit.
     */
    static Map<String, Object> stored(Path storeDir, Path work) throws Exception {
        Generator.deleteTree(work);
        Generator.copyTree(storeDir, work);
        DefaultMessageStore store = newStore(config(work.toString()));
        RocksDBConsumeQueueStore cq = (RocksDBConsumeQueueStore) store.getQueueStore();
        if (!cq.load()) {
            throw new IllegalStateException("RocksDBConsumeQueueStore refused " + work);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("max_physical_offset", cq.getMaxPhyOffsetInConsumeQueue());
        List<Object> queues = new ArrayList<>();
        for (String topic : TOPICS) {
            for (int q = 0; q < 18; q++) {
                long max = cq.getMaxOffsetInQueue(topic, q);
                if (max == 0) {
                    continue;
                }
                Map<String, Object> row = new LinkedHashMap<>();
                row.put("topic", topic);
                row.put("queue_id", q);
                row.put("max_offset", max);
                row.put("max_physical_offset", cq.getMaxPhyOffsetInConsumeQueue(topic, q));
                List<Object> units = new ArrayList<>();
                for (long off = 0; off < max; off++) {
                    ByteBuffer b = cq.get(topic, q, off);
                    units.add(b == null ? null : List.of(off, b.getLong(0), b.getInt(8), b.getLong(12), b.getLong(20)));
                }
                row.put("units", units);
                queues.add(row);
            }
        }
        out.put("queues", queues);
        cq.shutdown();
        return out;
    }

    /** A real restart on a copy: load() (RocksDB mode's recovery), start, dispatch caught up, then the queues. */
    static Map<String, Object> recovered(Path storeDir, Path work) throws Exception {
        Generator.deleteTree(work);
        Generator.copyTree(storeDir, work);
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, String> before = Generator.fileDigests(work);
        DefaultMessageStore store = newStore(Generator.quiet(config(work.toString())));
        boolean loaded = Generator.load(store, out);
        if (loaded) {
            out.put("dispatch_from_physical_offset", store.getQueueStore().getDispatchFromPhyOffset(false));
            store.start();
            waitQueues(store);
            out.put("commitlog_min_offset", store.getMinPhyOffset());
            out.put("commitlog_max_offset", store.getMaxPhyOffset());
            out.put("max_physical_offset_in_queues", ((RocksDBConsumeQueueStore) store.getQueueStore()).getMaxPhyOffsetInConsumeQueue());
            List<Object> queues = new ArrayList<>();
            for (String topic : TOPICS) {
                for (int q = 0; q < 18; q++) {
                    long max = store.getMaxOffsetInQueue(topic, q);
                    if (max == 0) {
                        continue;
                    }
                    long min = store.getMinOffsetInQueue(topic, q);
                    Map<String, Object> row = new LinkedHashMap<>();
                    row.put("topic", topic);
                    row.put("queue_id", q);
                    row.put("min_offset", min);
                    row.put("max_offset", max);
                    ConsumeQueueInterface queue = store.getConsumeQueue(topic, q);
                    List<Object> units = new ArrayList<>();
                    for (long off = min; off < max; off++) {
                        CqUnit u = queue.get(off);
                        units.add(u == null ? null : List.of(off, u.getPos(), u.getSize(), u.getTagsCode()));
                    }
                    row.put("units", units);
                    GetMessageResult got = store.getMessage("golden_view", topic, q, min, 32, null);
                    row.put("get_message", List.of(String.valueOf(got.getStatus()), got.getMessageCount(),
                        got.getNextBeginOffset(), got.getMinOffset(), got.getMaxOffset()));
                    got.release();
                    queues.add(row);
                }
            }
            out.put("queues", queues);
            store.shutdown();
        }
        Generator.putFileChanges(out, before, Generator.fileDigests(work));
        return out;
    }
}
