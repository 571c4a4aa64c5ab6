package io.rocketstore.golden;

import java.io.File;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.broker.offset.LmqConsumerOffsetManager;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.queue.ConsumeQueueInterface;
import org.apache.rocketmq.store.queue.CqUnit;

/**
 * Golden stores of LMQ multi-dispatch (enableLmq + enableMultiDispatch, RocketMQ 5.5.1): RocketMQ's own
 * DefaultMessageStore writes records whose INNER_MULTI_DISPATCH names %LMQ% queues; its CommitLog assigns each
 * named queue's offset into INNER_MULTI_QUEUE_OFFSET and its ConsumeQueue dispatch writes the entries into
 * consumequeue/%LMQ%name/0/. config/lmqConsumerOffset.json is written by the broker's own
 * LmqConsumerOffsetManager (commitOffset + encode(true), as ConfigManager.persist writes it).
 *
 * Built only with -Drocksdb (pom profile "rocksdb": it carries the rocketmq-broker jar); run by
 * tests/golden/regenerate.py --lmq:
 *
 *   write   --store DIR --mode clean|crash   phase A, 4.5 s pause (checkpoint), phase B; crash halts
 *   offsets --store DIR --set topic@group/queue=offset ...   (a %LMQ% group goes to lmqOffsetTable, others to
 *           offsetTable)
 *   view    --store DIR --work SCRATCH --out FILE   RocketMQ's view after a real restart (recovery) and after
 *           a rebuild (consumequeue/ and index/ deleted), each on a copy: every queue's min/max, units,
 *           getMessage, the bytes of every %LMQ% ConsumeQueue file; the offsets as LmqConsumerOffsetManager
 *           decodes them
 */
final class LmqGolden {
    static final int MESSAGES = 260;
    /** INNER_MULTI_DISPATCH values, chosen by message number; null: an ordinary record. */
    static final String[] DISPATCH = {"%LMQ%alpha", "%LMQ%alpha,%LMQ%beta", "%LMQ%beta,%LMQ%中文,%LMQ%alpha", null,
        "%LMQ%gamma", null, "%LMQ%beta"};

    private LmqGolden() {
    }

    public static void main(String[] argv) throws Exception {
        Generator.Args args = new Generator.Args(argv);
        Generator.log("RocketMQ " + Rmq.version() + " LMQ: " + String.join(" ", argv));
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
        cfg.setEnableLmq(true);
        cfg.setEnableMultiDispatch(true);
        return cfg;
    }

    static void write(Generator.Args args) throws Exception {
        boolean crash = args.get("mode").equals("crash");
        MessageStoreConfig cfg = config(args.get("store"));
        DefaultMessageStore store = Generator.open(cfg);
        store.start();
        Generator.Writer w = new Generator.Writer(store);
        int a = MESSAGES * 6 / 10;
        for (int i = 0; i < a; i++) {
            emit(w, i);
        }
        Thread.sleep(4500);
        cfg.setFlushCommitLogThoroughInterval(Integer.MAX_VALUE / 2);
        cfg.setFlushConsumeQueueThoroughInterval(Integer.MAX_VALUE / 2);
        Thread.sleep(1500);
        for (int i = a; i < MESSAGES; i++) {
            emit(w, i);
        }
        Generator.waitDispatched(store);
        Generator.log("wrote " + MESSAGES + " messages, CommitLog max offset " + store.getMaxPhyOffset());
        if (crash) {
            Generator.log("halting without shutdown");
            Runtime.getRuntime().halt(0);
        }
        store.shutdown();
    }

    /**
     * Message i: LmqTopic (4 queues) or TopicTest (2) with one of DISPATCH; every 37th names a queue with a
     * '/' (RocketMQ assigns it an offset but never dispatches it); every 30th is a %RETRY% record carrying the
     * property (no LMQ there: topicAllowsLMQ).
     */
    static void emit(Generator.Writer w, int i) throws Exception {
        String topic = i % 5 == 4 ? "TopicTest" : "LmqTopic";
        int queue = i % (topic.equals("LmqTopic") ? 4 : 2);
        String dispatch = DISPATCH[i % DISPATCH.length];
        if (i % 37 == 20) {
            dispatch = "%LMQ%bad/../escape,%LMQ%alpha";
        }
        if (i % 30 == 5) {
            topic = "%RETRY%golden_group";
            queue = 0;
            dispatch = "%LMQ%alpha";
        }
        MessageExt m = w.message(topic, queue, w.body(i, 40 + (i * 37) % 900));
        m.setTags(i % 3 == 0 ? "TagA" : "TagB");
        m.setKeys("lmq-" + i);
        if (dispatch != null) {
            MessageAccessor.putProperty(m, MessageConst.PROPERTY_INNER_MULTI_DISPATCH, dispatch);
        }
        MessageClientIDSetter.setUniqID(m);
        w.put(m);
    }

    /** config/lmqConsumerOffset.json through LmqConsumerOffsetManager.commitOffset and encode(true). */
    static void offsets(Generator.Args args) throws Exception {
        LmqConsumerOffsetManager manager = new LmqConsumerOffsetManager();
        for (String s : args.all("set")) {            // topic@group/queue=offset
            int at = s.indexOf('@');
            int slash = s.lastIndexOf('/');
            int eq = s.lastIndexOf('=');
            String group = s.substring(at + 1, slash);
            int queue = Integer.parseInt(s.substring(slash + 1, eq));
            long offset = Long.parseLong(s.substring(eq + 1));
            if (MixAll.isLmq(group)) {
                manager.commitOffset("127.0.0.1", group, s.substring(0, at), queue, offset);
            } else {
                // ConsumerOffsetManager.commitOffset's own map update (its data-version step needs a BrokerController)
                manager.getOffsetTable().computeIfAbsent(s.substring(0, slash), k -> new ConcurrentHashMap<>(2))
                    .put(queue, offset);
            }
        }
        String file = args.get("store") + File.separator + "config" + File.separator + "lmqConsumerOffset.json";
        MixAll.string2File(manager.encode(true), file);
        Generator.log("lmq consumer offsets written to " + file);
    }

    static void view(Generator.Args args) throws Exception {
        Path storeDir = Paths.get(args.get("store"));
        Path work = Paths.get(args.get("work"));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        out.put("abort_present", Files.exists(storeDir.resolve("abort")));
        out.put("recovery", restart(storeDir, work, false));
        out.put("rebuild", restart(storeDir, work, true));
        Path offsets = storeDir.resolve("config").resolve("lmqConsumerOffset.json");
        if (Files.exists(offsets)) {
            LmqConsumerOffsetManager manager = new LmqConsumerOffsetManager();
            manager.decode(new String(Files.readAllBytes(offsets), StandardCharsets.UTF_8));
            List<Object> rows = new ArrayList<>();
            for (Map.Entry<String, ? extends Map<Integer, Long>> e : new TreeMap<>(manager.getOffsetTable()).entrySet()) {
                String[] tg = e.getKey().split("@");
                for (Integer q : new TreeMap<>(e.getValue()).keySet()) {
                    // queryOffset of a non-LMQ group reads the broker's reset table first (needs a BrokerController):
                    // with no reset pending it is this table's value
                    rows.add(List.of(tg[0], tg[1], q, MixAll.isLmq(tg[1]) ? manager.queryOffset(tg[1], tg[0], q)
                        : e.getValue().get(q)));
                }
            }
            for (String key : new TreeMap<>(manager.getLmqOffsetTable()).keySet()) {
                String[] tg = key.split("@");
                rows.add(List.of(tg[0], tg[1], 0, manager.queryOffset(tg[1], tg[0], 0)));
            }
            out.put("consumer_offsets", rows);
        }
        Files.write(Paths.get(args.get("out")), Json.write(out).getBytes(StandardCharsets.UTF_8));
        Generator.deleteTree(work);
    }

    /** load() (recovery; with rebuild, consumequeue/ and index/ deleted first), start, dispatch caught up. */
    static Map<String, Object> restart(Path storeDir, Path work, boolean rebuild) throws Exception {
        Generator.deleteTree(work);
        Generator.copyTree(storeDir, work);
        if (rebuild) {
            Generator.deleteTree(work.resolve("consumequeue"));
            Generator.deleteTree(work.resolve("index"));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, String> before = Generator.fileDigests(work);
        MessageStoreConfig cfg = Generator.quiet(config(work.toString()));
        if (rebuild) {
            cfg.setRecheckReputOffsetFromCq(true);
        }
        DefaultMessageStore store = Rmq.newStore(cfg);
        boolean loaded = Generator.load(store, out);
        if (loaded) {
            store.start();
            Generator.waitDispatched(store);
            out.put("commitlog_min_offset", store.getMinPhyOffset());
            out.put("commitlog_max_offset", store.getMaxPhyOffset());
            List<Object> queues = new ArrayList<>();
            Map<String, ? extends Map<Integer, ?>> table = store.getConsumeQueueTable();
            for (String topic : new TreeMap<>(table).keySet()) {
                for (Integer q : new TreeMap<>(table.get(topic)).keySet()) {
                    queues.add(queue(store, topic, q));
                }
            }
            out.put("queues", queues);
            store.shutdown();
            Map<String, Object> files = new TreeMap<>();
            Path cq = work.resolve("consumequeue");
            if (Files.isDirectory(cq)) {
                try (var s = Files.walk(cq)) {
                    for (Path p : (Iterable<Path>) s.filter(Files::isRegularFile)::iterator) {
                        String rel = work.relativize(p).toString().replace(File.separatorChar, '/');
                        if (rel.startsWith("consumequeue/" + MixAll.LMQ_PREFIX)) {
                            files.put(rel, HexFormat.of().formatHex(Files.readAllBytes(p)));
                        }
                    }
                }
            }
            out.put("lmq_queue_files", files);
        }
        Generator.putFileChanges(out, before, Generator.fileDigests(work));
        return out;
    }

    /** One queue: min/max, its units, and getMessage from min to max (physical offset and queue offset of each). */
    static Map<String, Object> queue(DefaultMessageStore store, String topic, int q) throws Exception {
        long min = store.getMinOffsetInQueue(topic, q);
        long max = Rmq.maxOffsetInQueue(store, topic, q);
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
        List<Object> calls = new ArrayList<>();
        List<Object> got = new ArrayList<>();
        long next = min;
        for (int guard = 0; guard < 1000; guard++) {
            GetMessageResult r = store.getMessage("golden_view", topic, q, next, 32, null);
            calls.add(List.of(next, String.valueOf(r.getStatus()), r.getMessageCount(), r.getNextBeginOffset(),
                r.getMinOffset(), r.getMaxOffset()));
            for (ByteBuffer b : r.getMessageBufferList()) {
                got.add(List.of(b.getLong(b.position() + 28), b.getLong(b.position() + 20)));
            }
            r.release();
            if (r.getMessageCount() == 0 || r.getNextBeginOffset() <= next) {
                break;
            }
            next = r.getNextBeginOffset();
        }
        row.put("get_message", calls);
        row.put("messages", got);
        return row;
    }
}
