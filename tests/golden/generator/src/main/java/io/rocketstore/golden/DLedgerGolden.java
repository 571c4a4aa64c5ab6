package io.rocketstore.golden;

import java.io.File;
import java.lang.reflect.Field;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.MessageFilter;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.SelectMappedBufferResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * DLedger CommitLog stores (enableDLegerCommitLog=true), written and read by RocketMQ's own DLedgerCommitLog
 * and the dledger library under it (a one-node group "golden", self id n0, that elects itself leader):
 *
 * <pre>
 *   dledger-write --store DIR --mode clean|crash|switched [--messages N]
 *       clean: N messages of Generator.Writer's mix, shut down; crash: the same, then Runtime.halt();
 *       switched: N/2 messages with the classic CommitLog (shut down), then the store reopened with
 *       DLedger (the old commitlog/ kept up to dividedCommitlogOffset) and N/2 more, shut down
 *   dledger-view --store DIR --work DIR --out FILE
 *       on a copy: load() (DLedger's and RocketMQ's recovery), start(), dispatch caught up; then RocketMQ's view:
 *       every queue's min/max offset and every message getMessage returns (physical offset, size, decoded
 *       fields), queryMessage for keys, the CommitLog's min/max offset, DLedger's entries (get(index) for every
 *       index), ledger begin/end/committed index and pos, and the files recovery deleted or changed
 * </pre>
 *
 * Data files (and the classic segments of the switched store) are 64 KiB, so 200 messages roll over a data file.
 * DLedger's index file is 160 MiB by default (DLedgerConfig.mappedFileSizeForEntryIndex, not reachable from
 * MessageStoreConfig): the store's index file list is replaced, before load(), by one of the same class with
 * INDEX_FILE_SIZE bytes per file (the golden geometry, as the small CommitLog segments). Everything dledger
 * specific is reached by reflection, so this class compiles against every rocketmq-store the generator builds.
 */
final class DLedgerGolden {
    static final String GROUP = "golden";
    static final String SELF_ID = "n0";
    static final int INDEX_FILE_SIZE = 32 * 1024;   // 1024 index units of 32 bytes
    static final int DEFAULT_MESSAGES = 200;
    static final int DATA_FILE_SIZE = 64 * 1024;    // mappedFileSizeCommitLog: DLedger's data files and commitlog/

    private DLedgerGolden() {
    }

    static MessageStoreConfig config(String root, boolean dledger) throws Exception {
        MessageStoreConfig cfg = Generator.config(root);
        cfg.setMappedFileSizeCommitLog(DATA_FILE_SIZE);
        if (dledger) {
            int port;
            try (ServerSocket s = new ServerSocket(0)) {
                port = s.getLocalPort();
            }
            cfg.setEnableDLegerCommitLog(true);
            cfg.setdLegerGroup(GROUP);
            cfg.setdLegerSelfId(SELF_ID);
            cfg.setdLegerPeers(SELF_ID + "-127.0.0.1:" + port);
        }
        return cfg;
    }

    /** A DLedger store, not loaded: its index file list replaced by one of INDEX_FILE_SIZE-byte files. */
    static DefaultMessageStore newStore(MessageStoreConfig cfg) throws Exception {
        DefaultMessageStore store = Rmq.newStore(cfg);
        if (cfg.isEnableDLegerCommitLog()) {
            Object fileStore = dledgerStore(store);
            Object config = Rmq.invoke(server(store), "getdLedgerConfig");
            String indexPath = (String) Rmq.invoke(config, "getIndexStorePath");
            Field f = fileStore.getClass().getDeclaredField("indexFileList");
            f.setAccessible(true);
            Object list = f.getType().getConstructor(String.class, int.class).newInstance(indexPath, INDEX_FILE_SIZE);
            f.set(fileStore, list);
        }
        return store;
    }

    static Object server(DefaultMessageStore store) throws Exception {
        return Rmq.invoke(store.getCommitLog(), "getdLedgerServer");
    }

    static Object dledgerStore(DefaultMessageStore store) throws Exception {
        return Rmq.invoke(server(store), "getdLedgerStore");
    }

    static void awaitLeader(DefaultMessageStore store) throws Exception {
        Object member = Rmq.invoke(server(store), "getMemberState");
        long deadline = System.currentTimeMillis() + 60_000;
        while (!(Boolean) Rmq.invoke(member, "isLeader")) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("the one-node DLedger group did not elect itself within 60 s");
            }
            Thread.sleep(100);
        }
    }

    static DefaultMessageStore open(MessageStoreConfig cfg) throws Exception {
        DefaultMessageStore store = newStore(cfg);
        if (!store.load()) {
            throw new IllegalStateException("RocketMQ refused to load the store at " + cfg.getStorePathRootDir());
        }
        return store;
    }

    static void write(Generator.Args args) throws Exception {
        String mode = args.get("mode");
        String root = args.get("store");
        int n = args.has("messages") ? Integer.parseInt(args.get("messages")) : DEFAULT_MESSAGES;
        int first = 0;
        if (mode.equals("switched")) {
            DefaultMessageStore classic = open(config(root, false));
            classic.start();
            Generator.Writer w = new Generator.Writer(classic);
            for (; first < n / 2; first++) {
                w.emit(first);
            }
            Generator.waitDispatched(classic);
            Generator.log("classic part: " + w.records + " records, CommitLog max offset " + classic.getMaxPhyOffset());
            classic.shutdown();
        }
        DefaultMessageStore store = open(config(root, true));
        store.start();
        awaitLeader(store);
        Generator.Writer w = new Generator.Writer(store);
        for (int i = first; i < n; i++) {
            w.emit(i);
        }
        Generator.waitDispatched(store);
        Generator.log("dledger part: " + w.records + " records, CommitLog max offset " + store.getMaxPhyOffset());
        if (mode.equals("crash")) {
            Thread.sleep(1500);   // DLedger's flush service: the entries reach the files (page cache) as on a broker
            Generator.log("halting without shutdown");
            Runtime.getRuntime().halt(0);
        }
        store.shutdown();
    }

    static void view(Generator.Args args) throws Exception {
        Path storeDir = Paths.get(args.get("store"));
        Path work = Paths.get(args.get("work"));
        Generator.deleteTree(work);
        Generator.copyTree(storeDir, work);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        out.put("abort_present", Files.exists(work.resolve("abort")));
        out.put("dledger_checkpoint", readCheckpoint(work.resolve("dledger-" + SELF_ID).resolve("checkpoint")));
        Map<String, String> before = Generator.fileDigests(work);
        MessageStoreConfig cfg = Generator.quiet(config(work.toString(), true));
        DefaultMessageStore store = newStore(cfg);
        boolean loaded = Generator.load(store, out);
        if (loaded) {
            Object fs = dledgerStore(store);
            Map<String, Object> ledger = new LinkedHashMap<>();
            for (String g : new String[] {"getLedgerBeginIndex", "getLedgerEndIndex", "getLedgerEndTerm",
                                          "getCommittedIndex", "getCommittedPos", "getWritePos"}) {
                ledger.put(g.substring(3, 4).toLowerCase() + g.substring(4), Rmq.getter(fs, g));
            }
            out.put("ledger_after_load", ledger);
            out.put("divided_commitlog_offset", field(store.getCommitLog(), "dividedCommitlogOffset"));
            out.put("entries", entries(fs, (Long) ledger.get("ledgerBeginIndex"), (Long) ledger.get("ledgerEndIndex")));
            store.start();
            awaitLeader(store);
            Generator.waitDispatched(store);
            out.put("commitlog_min_offset", store.getMinPhyOffset());
            out.put("commitlog_max_offset", store.getMaxPhyOffset());
            List<Object> queues = Generator.queues(store);
            out.put("queues", queues);
            List<Object> messages = new ArrayList<>();
            List<String> keys = new ArrayList<>();
            for (Object o : queues) {
                @SuppressWarnings("unchecked")
                Map<String, Object> q = (Map<String, Object>) o;
                String topic = (String) q.get("topic");
                int qid = (Integer) q.get("queue_id");
                long hi = (Long) q.get("max_offset");
                for (long off = (Long) q.get("min_offset"); off < hi; ) {
                    GetMessageResult r = store.getMessage("golden_dledger", topic, qid, off, 32, (MessageFilter) null);
                    if (r == null || r.getMessageMapedList().isEmpty()) {
                        Map<String, Object> gap = new LinkedHashMap<>();
                        gap.put("topic", topic);
                        gap.put("queue_id", qid);
                        gap.put("queue_offset", off);
                        gap.put("status", r == null || r.getStatus() == null ? null : r.getStatus().name());
                        messages.add(gap);
                        if (r == null || r.getNextBeginOffset() <= off) {
                            break;
                        }
                        off = r.getNextBeginOffset();
                        continue;
                    }
                    for (SelectMappedBufferResult sbr : r.getMessageMapedList()) {
                        Map<String, Object> m = describe(sbr);
                        messages.add(m);
                        if (m.get("keys") != null && keys.size() < 40 && !((String) m.get("keys")).isEmpty()) {
                            keys.add(topic + "\u0000" + ((String) m.get("keys")).split(" ")[0]);
                        }
                    }
                    off = r.getNextBeginOffset();
                    r.release();
                }
            }
            out.put("messages", messages);
            List<Object> queries = new ArrayList<>();
            for (String tk : keys) {
                String[] parts = tk.split("\u0000");
                if (parts.length < 2 || parts[1].isEmpty()) {
                    continue;
                }
                QueryMessageResult r = store.queryMessage(parts[0], parts[1], 64, 0, Long.MAX_VALUE);
                List<Object> offsets = new ArrayList<>();
                for (ByteBuffer buf : r.getMessageBufferList()) {
                    MessageExt ext = MessageDecoder.decode(buf.slice(), false, false, false);
                    offsets.add(ext == null ? null : ext.getCommitLogOffset());
                }
                r.release();
                Map<String, Object> q = new LinkedHashMap<>();
                q.put("topic", parts[0]);
                q.put("key", parts[1]);
                q.put("physical_offsets", offsets);
                queries.add(q);
            }
            out.put("queries", queries);
            store.shutdown();
        }
        Generator.putFileChanges(out, before, Generator.fileDigests(work));
        out.put("files_after", Generator.listFiles(work));
        Files.write(Paths.get(args.get("out")), Json.write(out).getBytes(StandardCharsets.UTF_8));
        Generator.deleteTree(work);
        Generator.log("dledger view: loaded=" + loaded + " max=" + out.get("commitlog_max_offset"));
    }

    /** DLedger's own entries, get(index) for every index of the ledger: index, term, pos, size, magic. */
    static List<Object> entries(Object fileStore, Long begin, Long end) throws Exception {
        List<Object> out = new ArrayList<>();
        if (begin == null || end == null || begin < 0) {
            return out;
        }
        for (long i = begin; i <= end; i++) {
            Object e = Rmq.invoke(fileStore, "get", i);
            Map<String, Object> m = new LinkedHashMap<>();
            for (String g : new String[] {"getIndex", "getTerm", "getPos", "getSize", "getMagic", "getChannel",
                                          "getChainCrc", "getBodyCrc"}) {
                m.put(g.substring(3, 4).toLowerCase() + g.substring(4), Rmq.getter(e, g));
            }
            byte[] body = (byte[]) Rmq.getter(e, "getBody");
            m.put("body_length", body == null ? null : body.length);
            out.add(m);
        }
        return out;
    }

    /** A message as getMessage hands it out: where RocketMQ read it and how MessageDecoder reads it. */
    static Map<String, Object> describe(SelectMappedBufferResult sbr) {
        ByteBuffer buf = sbr.getByteBuffer().slice();
        MessageExt m = MessageDecoder.decode(buf, true, false, false);
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("physical_offset", sbr.getStartOffset());
        r.put("size", sbr.getSize());
        r.put("stored_physical_offset", m.getCommitLogOffset());
        r.put("topic", m.getTopic());
        r.put("queue_id", m.getQueueId());
        r.put("queue_offset", m.getQueueOffset());
        r.put("sys_flag", m.getSysFlag());
        r.put("flag", m.getFlag());
        r.put("body_crc", m.getBodyCRC());
        r.put("born_timestamp", m.getBornTimestamp());
        r.put("store_timestamp", m.getStoreTimestamp());
        r.put("reconsume_times", m.getReconsumeTimes());
        r.put("prepared_transaction_offset", m.getPreparedTransactionOffset());
        byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
        r.put("body_length", body.length);
        r.put("body_sha256", Generator.sha256(body));
        r.put("properties", m.getProperties() == null ? new TreeMap<>() : new TreeMap<>(m.getProperties()));
        r.put("keys", m.getKeys());
        r.put("tags", m.getTags());
        r.put("msg_id", m.getMsgId());
        return r;
    }

    static Object field(Object target, String name) {
        for (Class<?> c = target.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(target);
            } catch (NoSuchFieldException e) {
                continue;
            } catch (IllegalAccessException e) {
                return null;
            }
        }
        return null;
    }

    static Map<String, Object> readCheckpoint(Path p) throws Exception {
        if (!Files.exists(p)) {
            return null;
        }
        java.util.Properties props = new java.util.Properties();
        try (java.io.Reader r = Files.newBufferedReader(p, StandardCharsets.UTF_8)) {
            props.load(r);
        }
        Map<String, Object> m = new TreeMap<>();
        for (String k : props.stringPropertyNames()) {
            m.put(k, props.getProperty(k));
        }
        return m;
    }

    @SuppressWarnings("unused")
    private static final String SEP = File.separator;
}
