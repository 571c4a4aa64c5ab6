package io.rocketstore.golden;

import java.io.File;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.stream.Stream;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBatch;
import org.apache.rocketmq.common.message.MessageExtBrokerInner;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.queue.ConsumeQueueInterface;
import org.apache.rocketmq.store.queue.CqUnit;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/**
 * Golden stores of RocketMQ 5.x's inner batches and BatchConsumeQueue (topic attribute queue.type=BatchCQ):
 * RocketMQ 5.5.1's own DefaultMessageStore, given the topic table a broker would hold, writes the CommitLog and
 * batchconsumequeue/. An inner batch is put exactly as the broker's SendMessageProcessor.sendBatchMessage builds
 * it for a BatchCQ topic: a MessageExtBatch whose body is the producer's MessageDecoder.encodeMessages of the
 * inner messages, sysflag NEED_UNWRAP | INNER_BATCH, property INNER_NUM (countInnerMsgNum), the batch's UNIQ_KEY
 * and CLUSTER, put with asyncPutMessage (the store adds INNER_BASE in BatchConsumeQueue.assignQueueOffset).
 * Single messages to the BatchCQ topic (a unit of batch size 1) and a classic topic are mixed in.
 *
 * Built only with -Drocksdb (pom profile "rocksdb": the RocketMQ 5.5 classes); run by
 * tests/golden/regenerate.py --batchcq:
 *
 *   write --store DIR --mode clean|crash      crash: Runtime.halt() after dispatch (abort left)
 *   view  --store DIR --work SCRATCH --out FILE
 *         RocketMQ's view on copies: the batchconsumequeue/ files and units as written; after load() (recovery),
 *         per BatchCQ queue getMinOffsetInQueue, getMaxOffsetInQueue, each unit, and getMessage at every queue
 *         offset with the messages a consumer receives (MessageDecoder.decode, then decodeMessage(ext, list) for
 *         a NEED_UNWRAP record, as the client's PullAPIWrapper does); and the batchconsumequeue/ RocketMQ rebuilds
 *         from the CommitLog when consumequeue/ and batchconsumequeue/ are removed.
 */
final class BatchCQGolden {
    static final int SENDS = 150;
    static final int BCQ_UNITS_PER_FILE = 20;
    static final String BATCH_TOPIC = "BatchTopic";
    static final int BATCH_QUEUES = 3;
    static final String PLAIN_TOPIC = "PlainTopic";
    static final String[] TAGS = {"TagA", "TagB", "TagC", null};

    private BatchCQGolden() {
    }

    public static void main(String[] argv) throws Exception {
        Generator.Args args = new Generator.Args(argv);
        Generator.log("RocketMQ " + Rmq.version() + " BatchCQ: " + String.join(" ", argv));
        int status = 0;
        try {
            switch (args.command) {
                case "write": write(args); break;
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
        cfg.setMapperFileSizeBatchConsumeQueue(BCQ_UNITS_PER_FILE * 46);
        return cfg;
    }

    /** The broker's topic table: BatchTopic with queue.type=BatchCQ, PlainTopic classic. */
    static ConcurrentMap<String, TopicConfig> topics() {
        ConcurrentMap<String, TopicConfig> table = new ConcurrentHashMap<>();
        TopicConfig batch = new TopicConfig(BATCH_TOPIC, BATCH_QUEUES, BATCH_QUEUES, ConfigFiles.RW);
        Map<String, String> attributes = new java.util.HashMap<>();
        attributes.put("queue.type", "BatchCQ");
        batch.setAttributes(attributes);
        table.put(BATCH_TOPIC, batch);
        table.put(PLAIN_TOPIC, new TopicConfig(PLAIN_TOPIC, 2, 2, ConfigFiles.RW));
        return table;
    }

    static DefaultMessageStore newStore(MessageStoreConfig cfg) throws Exception {
        BrokerConfig brokerConfig = new BrokerConfig();
        brokerConfig.setLongPollingEnable(false);
        return new DefaultMessageStore(cfg, new BrokerStatsManager("golden", false), null, brokerConfig, topics());
    }

    static void write(Generator.Args args) throws Exception {
        boolean crash = args.get("mode").equals("crash");
        MessageStoreConfig cfg = config(args.get("store"));
        DefaultMessageStore store = newStore(cfg);
        if (!store.load()) {
            throw new IllegalStateException("RocketMQ refused to load " + cfg.getStorePathRootDir());
        }
        store.start();
        Random rnd = new Random(Generator.SEED);
        InetSocketAddress storeHost = new InetSocketAddress(InetAddress.getByName("192.168.0.1"), 10911);
        InetSocketAddress bornHost = new InetSocketAddress(InetAddress.getByName("10.0.0.7"), 40123);
        int batches = 0;
        int inner = 0;
        for (int i = 0; i < SENDS; i++) {
            PutMessageResult r;
            if (i % 10 == 9) {
                r = store.putMessage(single(PLAIN_TOPIC, i % 2, i, rnd, storeHost, bornHost));
            } else if (i % 5 == 3) {
                r = store.putMessage(single(BATCH_TOPIC, i % BATCH_QUEUES, i, rnd, storeHost, bornHost));
            } else {
                int n = 1 + rnd.nextInt(12);
                r = store.putMessage(batch(i % BATCH_QUEUES, i, n, rnd, storeHost, bornHost));
                batches++;
                inner += n;
            }
            if (r == null || !r.isOk()) {
                throw new IllegalStateException("put " + i + " failed: " + r);
            }
        }
        Generator.waitDispatched(store);
        ConfigFiles.persistTopics(Paths.get(cfg.getStorePathRootDir(), "config", "topics.json").toString(), topics(),
            Rmq.newInstance(Rmq.DATA_VERSION));
        Generator.log("wrote " + SENDS + " records (" + batches + " inner batches, " + inner
            + " inner messages), CommitLog max offset " + store.getMaxPhyOffset());
        if (crash) {
            Generator.log("halting without shutdown");
            Runtime.getRuntime().halt(0);
        }
        store.shutdown();
    }

    /** One producer message (what the client sends; its properties as DefaultMQProducerImpl leaves them). */
    static Message clientMessage(String topic, int i, int k, Random rnd) {
        Message m = new Message();
        m.setTopic(topic);
        m.setFlag(k % 3 == 2 ? 7 : 0);
        String tag = TAGS[(i + k) % TAGS.length];
        if (tag != null) {
            m.setTags(tag);
        }
        if ((i + k) % 4 != 1) {
            m.setKeys(k % 5 == 4 ? "key-" + i + "-" + k + " extra-" + k : "key-" + i + "-" + k);
        }
        if (k % 2 == 0) {
            m.putUserProperty("seq", i + "." + k);
        }
        MessageClientIDSetter.setUniqID(m);
        byte[] body = new byte[rnd.nextInt(k % 7 == 6 ? 1500 : 300)];
        rnd.nextBytes(body);
        m.setBody(body);
        return m;
    }

    static MessageExtBrokerInner single(String topic, int queueId, int i, Random rnd, InetSocketAddress storeHost,
        InetSocketAddress bornHost) {
        Message m = clientMessage(topic, i, 0, rnd);
        MessageExtBrokerInner msg = new MessageExtBrokerInner();
        msg.setTopic(topic);
        msg.setQueueId(queueId);
        msg.setBody(m.getBody());
        msg.setFlag(m.getFlag());
        MessageAccessor.setProperties(msg, m.getProperties());
        MessageAccessor.putProperty(msg, MessageConst.PROPERTY_CLUSTER, "DefaultCluster");
        msg.setPropertiesString(MessageDecoder.messageProperties2String(msg.getProperties()));
        msg.setTagsCode(MessageExtBrokerInner.tagsString2tagsCode(msg.getTags()));
        msg.setBornTimestamp(1764000000000L + i);
        msg.setBornHost(bornHost);
        msg.setStoreHost(storeHost);
        return msg;
    }

    /** SendMessageProcessor.sendBatchMessage for a BatchCQ topic (5.5.1 source), on the producer's batch. */
    static MessageExtBatch batch(int queueId, int i, int n, Random rnd, InetSocketAddress storeHost,
        InetSocketAddress bornHost) {
        List<Message> messages = new ArrayList<>();
        for (int k = 0; k < n; k++) {
            messages.add(clientMessage(BATCH_TOPIC, i, k, rnd));
        }
        // the producer: MessageBatch.generateFromList + setUniqID on the batch, body = encodeMessages
        Message outer = new Message();
        outer.setTopic(BATCH_TOPIC);
        MessageClientIDSetter.setUniqID(outer);
        MessageExtBatch b = new MessageExtBatch();
        b.setTopic(BATCH_TOPIC);
        b.setQueueId(queueId);
        b.setSysFlag(0);
        b.setFlag(0);
        MessageAccessor.setProperties(b, new java.util.HashMap<>(outer.getProperties()));
        b.setBody(MessageDecoder.encodeMessages(messages));
        b.setBornTimestamp(1764000000000L + i);
        b.setBornHost(bornHost);
        b.setStoreHost(storeHost);
        b.setReconsumeTimes(0);
        MessageAccessor.putProperty(b, MessageConst.PROPERTY_CLUSTER, "DefaultCluster");
        b.setSysFlag(b.getSysFlag() | MessageSysFlag.NEED_UNWRAP_FLAG);
        b.setSysFlag(b.getSysFlag() | MessageSysFlag.INNER_BATCH_FLAG);
        b.setInnerBatch(true);
        int innerNum = MessageDecoder.countInnerMsgNum(ByteBuffer.wrap(b.getBody()));
        MessageAccessor.putProperty(b, MessageConst.PROPERTY_INNER_NUM, String.valueOf(innerNum));
        b.setPropertiesString(MessageDecoder.messageProperties2String(b.getProperties()));
        return b;
    }

    // ------------------------------------------------------------------------------------------- view

    static void view(Generator.Args args) throws Exception {
        Path storeDir = Paths.get(args.get("store"));
        Path work = Paths.get(args.get("work"));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        out.put("abort_present", Files.exists(storeDir.resolve("abort")));
        out.put("bcq_file_size", BCQ_UNITS_PER_FILE * 46);
        out.put("files", bcqFiles(storeDir));
        out.put("recovery", recovered(storeDir, work.resolve("recovered"), false));
        out.put("rebuild", recovered(storeDir, work.resolve("rebuilt"), true));
        Files.write(Paths.get(args.get("out")), Json.write(out).getBytes(StandardCharsets.UTF_8));
        Generator.deleteTree(work);
    }

    /** Every batchconsumequeue/ file: path, size, sha256 and its units (hex) up to the first all-zero unit. */
    static List<Object> bcqFiles(Path root) throws Exception {
        List<Object> files = new ArrayList<>();
        Path dir = root.resolve("batchconsumequeue");
        if (!Files.exists(dir)) {
            return files;
        }
        List<Path> paths;
        try (Stream<Path> s = Files.walk(dir)) {
            paths = s.filter(Files::isRegularFile).sorted().toList();
        }
        for (Path p : paths) {
            byte[] data = Files.readAllBytes(p);
            Map<String, Object> f = new LinkedHashMap<>();
            f.put("path", root.relativize(p).toString().replace(File.separatorChar, '/'));
            f.put("size", data.length);
            f.put("sha256", Generator.sha256(data));
            List<Object> units = new ArrayList<>();
            for (int at = 0; at + 46 <= data.length; at += 46) {
                byte[] unit = java.util.Arrays.copyOfRange(data, at, at + 46);
                boolean zero = true;
                for (byte x : unit) {
                    zero &= x == 0;
                }
                if (zero) {
                    break;
                }
                units.add(unit);
            }
            f.put("units", units);
            files.add(f);
        }
        return files;
    }

    /**
     * A restart on a copy (rebuild: with consumequeue/ and batchconsumequeue/ removed first, so RocketMQ
     * dispatches them again from the CommitLog): load(), start, dispatch caught up, then RocketMQ's view.
     */
    static Map<String, Object> recovered(Path storeDir, Path work, boolean rebuild) throws Exception {
        Generator.deleteTree(work);
        Generator.copyTree(storeDir, work);
        if (rebuild) {
            Generator.deleteTree(work.resolve("consumequeue"));
            Generator.deleteTree(work.resolve("batchconsumequeue"));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, String> before = Generator.fileDigests(work);
        MessageStoreConfig cfg = Generator.quiet(config(work.toString()));
        if (rebuild) {
            cfg.setRecheckReputOffsetFromCq(true);
        }
        DefaultMessageStore store = newStore(cfg);
        boolean loaded = Generator.load(store, out);
        if (loaded) {
            store.start();
            Generator.waitDispatched(store);
            out.put("commitlog_min_offset", store.getMinPhyOffset());
            out.put("commitlog_max_offset", store.getMaxPhyOffset());
            if (!rebuild) {
                out.put("queues", queues(store));
            }
            store.shutdown();
        }
        Generator.putFileChanges(out, before, Generator.fileDigests(work));
        if (rebuild) {
            out.put("files", bcqFiles(work));
        }
        return out;
    }

    static List<Object> queues(DefaultMessageStore store) throws Exception {
        List<Object> queues = new ArrayList<>();
        Map<String, ? extends Map<Integer, ?>> table = store.getConsumeQueueTable();
        for (String topic : new TreeMap<>(table).keySet()) {
            for (Integer q : new TreeMap<>(table.get(topic)).keySet()) {
                ConsumeQueueInterface queue = store.getConsumeQueue(topic, q);
                long min = store.getMinOffsetInQueue(topic, q);
                long max = store.getMaxOffsetInQueue(topic, q);
                Map<String, Object> row = new LinkedHashMap<>();
                row.put("topic", topic);
                row.put("queue_id", q);
                row.put("cq_type", String.valueOf(queue.getCQType()));
                row.put("min_offset", min);
                row.put("max_offset", max);
                if (!"BatchCQ".equals(String.valueOf(queue.getCQType()))) {
                    queues.add(row);
                    continue;
                }
                List<Object> units = new ArrayList<>();
                List<Object> gets = new ArrayList<>();
                List<Object> received = new ArrayList<>();
                long seenPhysical = -1;
                for (long off = Math.max(min, 0); off < max; off++) {
                    CqUnit u = queue.get(off);
                    if (u != null && u.getQueueOffset() == off) {
                        units.add(List.of(u.getQueueOffset(), u.getPos(), u.getSize(), u.getTagsCode(), u.getBatchNum(),
                            u.getCompactedOffset()));
                    }
                    GetMessageResult got = store.getMessage("golden_view", topic, q, off, 1, null);
                    List<Long> physical = new ArrayList<>();
                    for (ByteBuffer buf : got.getMessageBufferList()) {
                        MessageExt ext = MessageDecoder.decode(buf.slice(), true, true, false);
                        physical.add(ext.getCommitLogOffset());
                        if (ext.getCommitLogOffset() == seenPhysical) {
                            continue;
                        }
                        seenPhysical = ext.getCommitLogOffset();
                        List<MessageExt> list = new ArrayList<>();
                        if (MessageSysFlag.check(ext.getSysFlag(), MessageSysFlag.NEED_UNWRAP_FLAG)) {
                            MessageDecoder.decodeMessage(ext, list);
                        } else {
                            list.add(ext);
                        }
                        for (MessageExt m : list) {
                            received.add(consumed(m));
                        }
                    }
                    gets.add(List.of(off, String.valueOf(got.getStatus()), got.getMessageCount(), got.getNextBeginOffset(),
                        physical));
                    got.release();
                }
                row.put("units", units);
                row.put("get_message", gets);
                row.put("received", received);
                queues.add(row);
            }
        }
        return queues;
    }

    /** What a consumer receives of one message. */
    static Map<String, Object> consumed(MessageExt m) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("queue_offset", m.getQueueOffset());
        r.put("commitlog_offset", m.getCommitLogOffset());
        r.put("sys_flag", m.getSysFlag());
        r.put("flag", m.getFlag());
        r.put("store_timestamp", m.getStoreTimestamp());
        r.put("born_timestamp", m.getBornTimestamp());
        r.put("keys", m.getKeys());
        r.put("tags", m.getTags());
        r.put("properties", new TreeMap<>(m.getProperties()));
        r.put("body_size", m.getBody() == null ? 0 : m.getBody().length);
        r.put("body_sha256", Generator.sha256(m.getBody() == null ? new byte[0] : m.getBody()));
        return r;
    }
}
