package io.rocketstore.golden;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Stream;
import java.util.zip.Deflater;

import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.store.AppendMessageResult;
import org.apache.rocketmq.store.CommitLog;
import org.apache.rocketmq.store.CommitLogDispatcher;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.DispatchRequest;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.StoreCheckpoint;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * Writes and inspects RocketMQ stores with RocketMQ's own store code (DefaultMessageStore, CommitLog,
 * MessageDecoder, StoreCheckpoint). Runs as a standalone JVM, once per command:
 *
 * <pre>
 *   write   --store DIR --mode clean|crash|stale|propcrc  write the message mix; shut down (or halt: crash, stale)
 *   inspect --store DIR --out FILE                    every record as RocketMQ decodes it; checkpoint; files
 *   recover --store DIR --work DIR --keep DIR --out FILE [--rebuild] [--abort] [SETTINGS]
 *                                                     open a copy (--abort: as after a crash), let RocketMQ
 *                                                     recover and dispatch, report (load_seconds: the recovery)
 *   rebuild --store DIR --work DIR --keep DIR --out FILE [SETTINGS]
 *                                                     recover --rebuild with the given store settings and no
 *                                                     delayed-message delivery (the copy's CommitLog stays as it is)
 *   serve-check --store DIR --queries FILE --out FILE [SETTINGS]
 *                                                     start RocketMQ on DIR (in place: give a copy) and answer
 *                                                     getMessage / queryMessage / min-max offset queries (ServeCheck)
 *   expire  --store DIR                               let RocketMQ's cleaner delete the oldest segment
 *   offsets --store DIR --set topic@group/queueId=offset ...   persist config/consumerOffset.json
 *   dledger-write, dledger-view                       DLedger CommitLog stores (DLedgerGolden)
 *   config  --store DIR --out FILE [--delay level=offset ...]
 *                                                     persist config/topics.json, subscriptionGroup.json
 *                                                     (5.x: delayOffset.json); FILE: what RocketMQ was given
 * </pre>
 *
 * SETTINGS: --mappedFileSizeCommitLog N --mappedFileSizeConsumeQueue N --maxHashSlotNum N --maxIndexNum N
 * --messageDelayLevel "1s 5s ..." (each optional; the golden geometry below otherwise), and any other
 * MessageStoreConfig setting as --setting name=value (e.g. --setting commitLogRecoverMaxNum=2).
 *
 * Geometry is deliberately tiny so a store of a few hundred messages crosses every boundary: 128 KiB
 * CommitLog segments, 40-entry ConsumeQueue files, index files of 64 slots / 256 entries.
 */
public final class Generator {
    static final int COMMITLOG_FILE_SIZE = 128 * 1024;
    static final int CQ_ENTRIES_PER_FILE = 25;
    static final int INDEX_HASH_SLOTS = 64;
    static final int INDEX_MAX_ENTRIES = 256;
    static final int MESSAGES = 520;
    /**
     * write --mode stale: 880 messages, phase A 0-319 (ends in the second segment), B 320-369 (crosses into
     * the third), C 370-879 written with thorough flushes off (into the sixth segment), so the checkpoint's
     * times (4.x, 5.0-5.3: the end of A by the 3-second margin) and its logicsPhysicalOffset (5.5: the end of
     * B) lag the crash by three or more segments.
     */
    static final int STALE_MESSAGES = 880;
    static final int STALE_PHASE_A = 320;
    static final int STALE_PHASE_B = 370;
    static final long SEED = 20261122L;

    static final String LONG_RETRY_TOPIC = "%RETRY%" + "golden_group_with_a_very_long_name_".repeat(4);
    static final String SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX";
    static final String HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC";
    static final String OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
    static final int MAX_DELAY_LEVEL = 18;

    private Generator() {
    }

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        log("RocketMQ " + Rmq.version() + " (" + (Rmq.V5 ? "5.x" : "4.x") + " line): " + String.join(" ", argv));
        int status = 0;
        try {
            switch (args.command) {
                case "write": write(args); break;
                case "inspect": inspect(args); break;
                case "recover": recover(args); break;
                case "expire": expire(args); break;
                case "offsets": offsets(args); break;
                case "config": config(args); break;
                case "rebuild": recover(args, true, true); break;
                case "serve-check": ServeCheck.run(args); break;
                case "dledger-write": DLedgerGolden.write(args); break;
                case "dledger-view": DLedgerGolden.view(args); break;
                default: throw new IllegalArgumentException("unknown command " + args.command);
            }
        } catch (Exception | Error e) {
            e.printStackTrace();
            status = 1;
        }
        // RocketMQ leaves non-daemon threads behind either way; the process has done its job.
        System.exit(status);
    }

    // ----------------------------------------------------------------------------------------- config

    static MessageStoreConfig config(String root) {
        MessageStoreConfig cfg = new MessageStoreConfig();
        cfg.setStorePathRootDir(root);
        cfg.setStorePathCommitLog(root + File.separator + "commitlog");
        cfg.setMappedFileSizeCommitLog(COMMITLOG_FILE_SIZE);
        cfg.setMappedFileSizeConsumeQueue(CQ_ENTRIES_PER_FILE * 20);
        cfg.setMaxHashSlotNum(INDEX_HASH_SLOTS);
        cfg.setMaxIndexNum(INDEX_MAX_ENTRIES);
        cfg.setFlushIntervalConsumeQueue(200);
        cfg.setFlushConsumeQueueThoroughInterval(1000);
        cfg.setFlushCommitLogThoroughInterval(1000);
        cfg.setCleanResourceInterval(500);
        cfg.setHaListenPort(0);   // an ephemeral HA port: several runs (versions, regenerations) can overlap
        return cfg;
    }

    /** The store settings a command was given (SETTINGS in the class comment) over the golden geometry. */
    static MessageStoreConfig config(String root, Args args) {
        MessageStoreConfig cfg = config(root);
        if (args.has("mappedFileSizeCommitLog")) {
            cfg.setMappedFileSizeCommitLog(Integer.parseInt(args.get("mappedFileSizeCommitLog")));
        }
        if (args.has("mappedFileSizeConsumeQueue")) {
            cfg.setMappedFileSizeConsumeQueue(Integer.parseInt(args.get("mappedFileSizeConsumeQueue")));
        }
        if (args.has("maxHashSlotNum")) {
            cfg.setMaxHashSlotNum(Integer.parseInt(args.get("maxHashSlotNum")));
        }
        if (args.has("maxIndexNum")) {
            cfg.setMaxIndexNum(Integer.parseInt(args.get("maxIndexNum")));
        }
        if (args.has("messageDelayLevel")) {
            cfg.setMessageDelayLevel(args.get("messageDelayLevel"));
        }
        for (String s : args.all("setting")) {
            int eq = s.indexOf('=');
            setting(cfg, s.substring(0, eq), s.substring(eq + 1));
        }
        return cfg;
    }

    /** --setting name=value: any MessageStoreConfig setter of this release (int, long, boolean or String). */
    static void setting(MessageStoreConfig cfg, String name, String value) {
        String setter = "set" + Character.toUpperCase(name.charAt(0)) + name.substring(1);
        for (java.lang.reflect.Method m : MessageStoreConfig.class.getMethods()) {
            if (!m.getName().equals(setter) || m.getParameterCount() != 1) {
                continue;
            }
            Class<?> t = m.getParameterTypes()[0];
            Object v = t == int.class ? (Object) Integer.parseInt(value) : t == long.class ? (Object) Long.parseLong(value)
                : t == boolean.class ? (Object) Boolean.parseBoolean(value) : t == String.class ? value : null;
            if (v != null) {
                try {
                    m.invoke(cfg, v);
                } catch (ReflectiveOperationException e) {
                    throw new IllegalStateException(setter + "(" + value + ")", e);
                }
                return;
            }
        }
        throw new IllegalArgumentException("RocketMQ " + Rmq.version() + "'s MessageStoreConfig has no setting " + name);
    }

    /**
     * A store that serves and dispatches but adds nothing to the CommitLog: 4.x's in-store
     * ScheduleMessageService would deliver every delayed message that has fallen due since the store was
     * written (a SLAVE store does not start it; nothing else in the store code reads the role for
     * dispatch); the cleaner never expires a segment, whatever the files' age.
     */
    static MessageStoreConfig quiet(MessageStoreConfig cfg) {
        if (!Rmq.V5) {
            cfg.setBrokerRole(org.apache.rocketmq.store.config.BrokerRole.SLAVE);
        }
        cfg.setFileReservedTime(100 * 365 * 24);
        return cfg;
    }

    static DefaultMessageStore open(MessageStoreConfig cfg) throws Exception {
        DefaultMessageStore store = Rmq.newStore(cfg);
        if (!store.load()) {
            throw new IllegalStateException("RocketMQ refused to load the store at " + cfg.getStorePathRootDir());
        }
        return store;
    }

    // ------------------------------------------------------------------------------------------ write

    /**
     * The message mix, written in three phases separated by pauses so that the checkpoint (flushed by
     * RocketMQ's own flush services) lags the log the way it does on a real broker: phase A, 4.5 s pause,
     * phase B, thorough flush, then thorough flushes are switched off and phase C is written. A crash
     * after C therefore leaves a checkpoint whose 3-second-margin threshold falls inside the log.
     */
    static void write(Args args) throws Exception {
        String mode = args.get("mode");
        MessageStoreConfig cfg = config(args.get("store"));
        if (mode.equals("propcrc")) {
            if (!Rmq.V5) {
                throw new IllegalArgumentException("the CRC32 property exists only in RocketMQ 5.x");
            }
            MessageStoreConfig.class.getMethod("setEnabledAppendPropCRC", boolean.class).invoke(cfg, true);
        }
        DefaultMessageStore store = open(cfg);
        store.start();
        // stale: the checkpoint's last thorough flush several segments behind the crash (phase C is long)
        boolean stale = mode.equals("stale");
        int total = stale ? STALE_MESSAGES : MESSAGES;
        int a = stale ? STALE_PHASE_A : MESSAGES * 6 / 10;
        int b = stale ? STALE_PHASE_B : MESSAGES * 8 / 10;
        Writer w = writePhases(store, cfg, total, a, b);
        log("wrote " + w.records + " records, CommitLog max offset " + store.getMaxPhyOffset());
        if (mode.equals("crash") || stale) {
            // What a kill -9 leaves: page cache intact, abort file present, checkpoint as last flushed.
            log("halting without shutdown");
            Runtime.getRuntime().halt(0);
        }
        store.shutdown();
    }

    /** Messages 0..total-1 in the three phases (A up to a, B up to b, C with thorough flushes off), dispatched. */
    static Writer writePhases(DefaultMessageStore store, MessageStoreConfig cfg, int total, int a, int b)
        throws Exception {
        Writer w = new Writer(store);
        for (int i = 0; i < a; i++) {
            w.emit(i);
        }
        Thread.sleep(4500);
        for (int i = a; i < b; i++) {
            w.emit(i);
        }
        Thread.sleep(2500);
        cfg.setFlushCommitLogThoroughInterval(Integer.MAX_VALUE / 2);
        cfg.setFlushConsumeQueueThoroughInterval(Integer.MAX_VALUE / 2);
        Thread.sleep(1500);
        for (int i = b; i < total; i++) {
            w.emit(i);
        }
        waitDispatched(store);
        return w;
    }

    static void waitDispatched(DefaultMessageStore store) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 600_000;
        while (store.dispatchBehindBytes() > 0) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("dispatch did not catch up within 600 s");
            }
            Thread.sleep(50);
        }
        Thread.sleep(300);
    }

    /** Turns message number i into one to three records, the way producers and the broker would. */
    static final class Writer {
        final DefaultMessageStore store;
        final Random rnd = new Random(SEED);
        final InetSocketAddress storeHost4;
        final InetSocketAddress storeHost6;
        final Map<Integer, MessageExt> delayed = new HashMap<>();
        int records;
        long opQueueOffset;

        Writer(DefaultMessageStore store) throws IOException {
            this.store = store;
            this.storeHost4 = new InetSocketAddress(InetAddress.getByName("192.168.0.1"), 10911);
            this.storeHost6 = new InetSocketAddress(InetAddress.getByName("fd00::1"), 10911);
        }

        void emit(int i) throws Exception {
            if (i % 50 == 7) {
                transaction(i, true);
            } else if (i % 50 == 17) {
                transaction(i, false);
            } else if (i % 97 == 3 || i % 97 == 4) {
                // legacy PREPARED / ROLLBACK typed records: indexed-not-queued / neither
                MessageExt m = message("TopicTest", i % 4, body(i, 40));
                m.setSysFlag(i % 97 == 3 ? MessageSysFlag.TRANSACTION_PREPARED_TYPE : MessageSysFlag.TRANSACTION_ROLLBACK_TYPE);
                m.setTags("TagTx");
                m.setKeys("legacy-tx-" + i);
                MessageClientIDSetter.setUniqID(m);
                put(m);
            } else if (i % 40 == 11) {
                delay(i);
            } else if (i % 40 == 12 && Rmq.V5 && delayed.containsKey(i - 1)) {
                // 4.9.8 runs ScheduleMessageService inside the store and delivers due levels itself;
                // in 5.x it lives in the broker, so its messageTimeUp is reproduced here.
                deliver(delayed.remove(i - 1));
            } else if (i % 30 == 5) {
                retry(i, "%RETRY%golden_group");
            } else if (i % 30 == 6 && Rmq.V5) {
                retry(i, LONG_RETRY_TOPIC);   // topic longer than 127 bytes: a version-2 record
            } else if (i % 25 == 9) {
                compressed(i);
            } else if (i % 20 == 2) {
                ipv6(i);
            } else if (i % 60 == 33) {
                big(i);
            } else if (i % 13 == 0) {
                MessageExt m = message("NoTagTopic", i % 2, body(i, 10 + i % 90));
                m.getProperties().clear();   // no properties at all: PROPERTIESLENGTH 0
                put(m);
            } else {
                normal(i);
            }
        }

        void normal(int i) throws Exception {
            boolean order = i % 3 == 0;
            String topic = order ? "OrderTopic" : "TopicTest";
            MessageExt m = message(topic, i % (order ? 8 : 4), body(i, 20 + rnd.nextInt(700)));
            switch (i % 4) {
                case 0: m.setTags("TagA"); break;
                case 1: m.setTags("TagB"); break;
                case 2: m.setTags(order ? "TagA||TagB" : "TagC"); break;
                default: break;   // no TAGS
            }
            if (order && i % 4 == 2) {
                m.setSysFlag(m.getSysFlag() | MessageSysFlag.MULTI_TAGS_FLAG);
            }
            switch (i % 6) {
                case 0: m.setKeys("order-" + i); break;
                case 1: m.setKeys("order-" + i + " biz-" + (i % 7)); break;
                case 2: m.setKeys("k" + i + "  k" + (i + 1) + " "); break;   // empty pieces are not indexed
                case 3: m.setKeys("键-" + i + " 😀" + i); break;            // non-BMP: surrogate pairs in hashCode
                default: break;
            }
            if (i % 5 == 0) {
                m.setFlag(0x7);
            }
            if (i % 8 == 1) {
                MessageAccessor.putProperty(m, "userProp", "v=" + i + "\u0001x");   // 0x01 inside a value
            }
            MessageClientIDSetter.setUniqID(m);
            put(m);
        }

        void ipv6(int i) throws Exception {
            MessageExt m = message("V6Topic", i % 2, body(i, 60));
            m.setBornHost(new InetSocketAddress(InetAddress.getByName("fd00::17"), 40000 + i));
            m.setSysFlag(m.getSysFlag() | MessageSysFlag.BORNHOST_V6_FLAG);
            if (i % 40 == 2) {
                m.setStoreHost(storeHost6);
                m.setSysFlag(m.getSysFlag() | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG);
            }
            m.setTags("v6");
            m.setKeys("v6-" + i);
            MessageClientIDSetter.setUniqID(m);
            put(m);
        }

        void big(int i) throws Exception {
            int[] sizes = {0, 1, 4096, 16384, 32768, 65000, 12000, 50000, 255};
            int size = sizes[(i / 60) % sizes.length];
            byte[] body = new byte[size];
            new Random(SEED + i).nextBytes(body);
            MessageExt m = message("BigBodyTopic", i % 2, body);
            m.setTags("big");
            m.setKeys("big-" + size);
            MessageClientIDSetter.setUniqID(m);
            put(m);
        }

        void compressed(int i) throws Exception {
            byte[] raw = body(i, 5000);
            Deflater deflater = new Deflater(5);   // the producer's default zlib level
            deflater.setInput(raw);
            deflater.finish();
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] chunk = new byte[4096];
            while (!deflater.finished()) {
                out.write(chunk, 0, deflater.deflate(chunk));
            }
            deflater.end();
            MessageExt m = message("TopicTest", i % 4, out.toByteArray());
            // legacy ZLIB (type 0) and explicit ZLIB (type 3 in bits 0x700), alternately
            m.setSysFlag(MessageSysFlag.COMPRESSED_FLAG | (i % 2 == 0 ? 0 : 0x300));
            m.setTags("zip");
            MessageClientIDSetter.setUniqID(m);
            put(m);
        }

        void retry(int i, String topic) throws Exception {
            MessageExt m = message(topic, 0, body(i, 80));
            m.setReconsumeTimes(1 + i % 3);
            m.setFlag(0x1);
            MessageAccessor.putProperty(m, MessageConst.PROPERTY_RETRY_TOPIC, "TopicTest");
            MessageAccessor.putProperty(m, MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, "C0A8000100002A9F" + String.format("%016X", i * 1000L));
            MessageAccessor.putProperty(m, MessageConst.PROPERTY_RECONSUME_TIME, String.valueOf(1 + i % 3));
            m.setTags("TagRetry");
            m.setKeys("retry-" + i);
            MessageClientIDSetter.setUniqID(m);
            put(m);
        }

        /** A delay-level message; levels above the table's 18 are clamped by RocketMQ (or the hook). */
        void delay(int i) throws Exception {
            MessageExt m = message("TopicTest", i % 4, body(i, 120));
            int[] levels = {1, 3, 5, 18, 25, 2, 7, 10, 16, 17, 4, 6, 9, 12};
            int level = levels[(i / 40) % levels.length];
            m.setTags("TagDelay");
            m.setKeys("delay-" + level);
            MessageAccessor.putProperty(m, MessageConst.PROPERTY_DELAY_TIME_LEVEL, String.valueOf(level));
            MessageClientIDSetter.setUniqID(m);
            if (Rmq.V5) {
                // In 5.x the broker (HookUtils.transformDelayLevelMessage), not the store, rewrites the topic.
                level = Math.min(level, MAX_DELAY_LEVEL);
                MessageAccessor.putProperty(m, MessageConst.PROPERTY_DELAY_TIME_LEVEL, String.valueOf(level));
                MessageAccessor.putProperty(m, MessageConst.PROPERTY_REAL_TOPIC, m.getTopic());
                MessageAccessor.putProperty(m, MessageConst.PROPERTY_REAL_QUEUE_ID, String.valueOf(m.getQueueId()));
                m.setTopic(SCHEDULE_TOPIC);
                m.setQueueId(level - 1);
            }
            put(m);
            delayed.put(i, m);
        }

        /** The copy ScheduleMessageService delivers: properties string built before DELAY is removed. */
        void deliver(MessageExt scheduled) throws Exception {
            MessageExt m = Rmq.newInner();
            m.setBody(scheduled.getBody());
            m.setFlag(scheduled.getFlag());
            MessageAccessor.setProperties(m, new HashMap<>(scheduled.getProperties()));
            m.setTopic(m.getProperty(MessageConst.PROPERTY_REAL_TOPIC));
            m.setQueueId(Integer.parseInt(m.getProperty(MessageConst.PROPERTY_REAL_QUEUE_ID)));
            m.setBornTimestamp(scheduled.getBornTimestamp());
            m.setBornHost(scheduled.getBornHost());
            m.setStoreHost(storeHost4);
            m.setReconsumeTimes(scheduled.getReconsumeTimes());
            m.setWaitStoreMsgOK(false);
            Rmq.setPropertiesString(m, MessageDecoder.messageProperties2String(m.getProperties()));
            MessageAccessor.clearProperty(m, MessageConst.PROPERTY_DELAY_TIME_LEVEL);
            putRaw(m);
        }

        /** Half message, then the op record, then (commit only) the committed copy. */
        void transaction(int i, boolean commit) throws Exception {
            MessageExt half = message(HALF_TOPIC, 0, body(i, 64));
            MessageAccessor.putProperty(half, MessageConst.PROPERTY_REAL_TOPIC, "TopicTest");
            MessageAccessor.putProperty(half, MessageConst.PROPERTY_REAL_QUEUE_ID, String.valueOf(i % 4));
            MessageAccessor.putProperty(half, MessageConst.PROPERTY_TRANSACTION_PREPARED, "true");
            MessageAccessor.putProperty(half, MessageConst.PROPERTY_PRODUCER_GROUP, "golden_tx_group");
            half.setTags("TagTx");
            half.setKeys("tx-" + i);
            MessageClientIDSetter.setUniqID(half);
            AppendMessageResult halfResult = put(half);

            MessageExt op = message(OP_HALF_TOPIC, 0, String.valueOf(halfResult.getLogicsOffset()).getBytes(StandardCharsets.UTF_8));
            op.setTags("d");
            put(op);
            opQueueOffset++;

            if (commit) {
                MessageExt done = Rmq.newInner();
                done.setBody(half.getBody());
                done.setFlag(half.getFlag());
                MessageAccessor.setProperties(done, new HashMap<>(half.getProperties()));
                done.setTopic("TopicTest");
                done.setQueueId(i % 4);
                done.setBornTimestamp(half.getBornTimestamp());
                done.setBornHost(half.getBornHost());
                done.setStoreHost(storeHost4);
                done.setSysFlag(MessageSysFlag.TRANSACTION_COMMIT_TYPE);
                done.setPreparedTransactionOffset(halfResult.getWroteOffset());
                Rmq.setPropertiesString(done, MessageDecoder.messageProperties2String(done.getProperties()));
                MessageAccessor.clearProperty(done, MessageConst.PROPERTY_TRANSACTION_PREPARED);
                MessageAccessor.clearProperty(done, MessageConst.PROPERTY_REAL_TOPIC);
                MessageAccessor.clearProperty(done, MessageConst.PROPERTY_REAL_QUEUE_ID);
                putRaw(done);
            }
        }

        MessageExt message(String topic, int queueId, byte[] body) throws Exception {
            MessageExt m = Rmq.newInner();
            m.setTopic(topic);
            m.setQueueId(queueId);
            m.setBody(body);
            m.setWaitStoreMsgOK(true);
            m.setBornTimestamp(System.currentTimeMillis() - rnd.nextInt(50));
            m.setBornHost(new InetSocketAddress(InetAddress.getByName("10.1.2." + (1 + rnd.nextInt(200))), 30000 + rnd.nextInt(30000)));
            m.setStoreHost(storeHost4);
            return m;
        }

        byte[] body(int i, int length) {
            String unit = "golden message " + i + " | ";
            StringBuilder sb = new StringBuilder(length + unit.length());
            while (sb.length() < length) {
                sb.append(unit);
            }
            return sb.substring(0, length).getBytes(StandardCharsets.UTF_8);
        }

        AppendMessageResult put(MessageExt m) throws Exception {
            Rmq.setPropertiesString(m, MessageDecoder.messageProperties2String(m.getProperties()));
            return putRaw(m);
        }

        AppendMessageResult putRaw(MessageExt m) throws Exception {
            PutMessageResult r = Rmq.put(store, m);
            if (r == null || !r.isOk()) {
                throw new IllegalStateException("putMessage(" + m.getTopic() + ") failed: " + (r == null ? null : r.getPutMessageStatus()));
            }
            records++;
            return r.getAppendMessageResult();
        }
    }

    // ---------------------------------------------------------------------------------------- inspect

    /**
     * Every CommitLog record as RocketMQ reads it: MessageDecoder.decode for the stored fields and
     * CommitLog.checkMessageAndReturnSize (recovery's own validator) for the derived dispatch values
     * (tagsCode, keys, uniqKey) and the CRC verdict. Each segment is walked from position 0 until
     * RocketMQ's validator stops; the stop position and reason are part of the result. The store itself
     * is only read: the CommitLog instance lives in a scratch store under a temporary directory.
     */
    static void inspect(Args args) throws Exception {
        Path storeDir = Paths.get(args.get("store"));
        Path scratch = Files.createTempDirectory("golden-inspect");
        MessageStoreConfig cfg = config(scratch.toString());
        DefaultMessageStore scratchStore = open(cfg);   // load() parses the delay-level table
        CommitLog log = scratchStore.getCommitLog();

        List<Object> messages = new ArrayList<>();
        List<Object> segments = new ArrayList<>();
        File[] files = storeDir.resolve("commitlog").toFile().listFiles();
        java.util.Arrays.sort(files == null ? new File[0] : files);
        for (File f : files) {
            segments.add(walkSegment(log, cfg, f, messages));
        }

        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        out.put("segments", segments);
        out.put("checkpoint", checkpoint(storeDir, scratch));
        out.put("abort_present", Files.exists(storeDir.resolve("abort")));
        out.put("files", listFiles(storeDir));
        out.put("messages", messages);
        Files.write(Paths.get(args.get("out")), Json.write(out).getBytes(StandardCharsets.UTF_8));
        log("inspected " + messages.size() + " records in " + segments.size() + " segments");
    }

    /** One segment walked from position 0 as RocketMQ's validator walks it: its records appended to messages,
     * where and why the walk stopped returned (also the multi-path inspect's, MultiPath). */
    static Map<String, Object> walkSegment(CommitLog log, MessageStoreConfig cfg, File f, List<Object> messages)
        throws Exception {
        byte[] data = Files.readAllBytes(f.toPath());
        long base = Long.parseLong(f.getName());
        Map<String, Object> seg = new LinkedHashMap<>();
        seg.put("file", f.getName());
        seg.put("base_offset", base);
        seg.put("file_size", data.length);
        int pos = 0;
        int count = 0;
        String stop = "end of file";
        ByteBuffer whole = ByteBuffer.wrap(data);
        while (true) {
            if (pos + 8 > data.length) {
                stop = "end of file";
                break;
            }
            int total = whole.getInt(pos);
            int magic = whole.getInt(pos + 4);
            if (magic == 0xCBD43194) {
                Map<String, Object> blank = new LinkedHashMap<>();
                blank.put("file_position", pos);
                blank.put("physical_offset", base + pos);
                blank.put("total_size", total);
                seg.put("blank", blank);
                stop = "blank";
                break;
            }
            ByteBuffer at = ByteBuffer.wrap(data, pos, data.length - pos).slice();
            DispatchRequest req = Rmq.check(log, at.duplicate(), false);
            if (!req.isSuccess() || req.getMsgSize() <= 0) {
                stop = total == 0 && magic == 0 ? "zero"
                    : String.format("invalid record (totalSize %d, magic 0x%08X, RocketMQ size %d)", total, magic, req.getMsgSize());
                break;
            }
            messages.add(describe(log, cfg, at, req, f.getName(), base, pos));
            count++;
            pos += req.getMsgSize();
        }
        seg.put("records", count);
        seg.put("valid_end", pos);
        seg.put("stop_reason", stop);
        return seg;
    }

    static Map<String, Object> describe(CommitLog log, MessageStoreConfig cfg, ByteBuffer at, DispatchRequest req,
                                        String file, long base, int pos) throws Exception {
        MessageExt m = MessageDecoder.decode(at.duplicate(), true, false, false);
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("segment", file);
        r.put("file_position", pos);
        r.put("physical_offset", base + pos);
        r.put("total_size", m.getStoreSize());
        r.put("magic_code", at.getInt(4));
        r.put("body_crc", m.getBodyCRC());
        r.put("queue_id", m.getQueueId());
        r.put("flag", m.getFlag());
        r.put("queue_offset", m.getQueueOffset());
        r.put("stored_physical_offset", m.getCommitLogOffset());
        r.put("sys_flag", m.getSysFlag());
        r.put("born_timestamp", m.getBornTimestamp());
        putHost(r, "born_host", m.getBornHost());
        r.put("store_timestamp", m.getStoreTimestamp());
        putHost(r, "store_host", m.getStoreHost());
        r.put("reconsume_times", m.getReconsumeTimes());
        r.put("prepared_transaction_offset", m.getPreparedTransactionOffset());
        byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
        r.put("body_length", body.length);
        r.put("body_sha256", sha256(body));
        r.put("body_head", java.util.Arrays.copyOf(body, Math.min(body.length, 32)));
        r.put("topic", m.getTopic());
        Map<String, String> props = m.getProperties() == null ? new HashMap<>() : m.getProperties();
        r.put("properties", new TreeMap<>(props));
        r.put("msg_id", m.getMsgId());
        r.put("transaction_type", MessageSysFlag.getTransactionValue(m.getSysFlag()));
        r.put("tags_code", req.getTagsCode());
        r.put("keys", req.getKeys());
        r.put("uniq_key", req.getUniqKey());
        r.put("body_crc_ok", Rmq.check(log, at.duplicate(), true).isSuccess());
        r.put("computed_body_crc", UtilAll.crc32(body));
        if (Rmq.V5 && props.containsKey("__CRC32#")) {
            // recovery's whole-record check: forceVerifyPropCRC makes checkMessageAndReturnSize verify it
            MessageStoreConfig.class.getMethod("setForceVerifyPropCRC", boolean.class).invoke(cfg, true);
            r.put("prop_crc_ok", Rmq.check(log, at.duplicate(), true).isSuccess());
            MessageStoreConfig.class.getMethod("setForceVerifyPropCRC", boolean.class).invoke(cfg, false);
        }
        r.put("index_keys", indexKeys(req));
        return r;
    }

    static final boolean INDEXES_TAGS = hasTagIndex();

    static boolean hasTagIndex() {
        try {
            org.apache.rocketmq.store.index.IndexService.class.getDeclaredMethod("buildKey", String.class, String.class, String.class);
            return true;
        } catch (NoSuchMethodException e) {
            return false;
        }
    }

    /** IndexService.buildIndex: topic#UNIQ_KEY, then topic#key for every non-empty KEYS piece; not for ROLLBACK. */
    static List<Object> indexKeys(DispatchRequest req) {
        List<Object> keys = new ArrayList<>();
        if (MessageSysFlag.getTransactionValue(req.getSysFlag()) == MessageSysFlag.TRANSACTION_ROLLBACK_TYPE) {
            return keys;
        }
        List<String> raw = new ArrayList<>();
        if (req.getUniqKey() != null) {
            raw.add(req.getTopic() + "#" + req.getUniqKey());
        }
        if (req.getKeys() != null && req.getKeys().length() > 0) {
            for (String k : req.getKeys().split(MessageConst.KEY_SEPARATOR)) {
                if (k.length() > 0) {
                    raw.add(req.getTopic() + "#" + k);
                }
            }
        }
        // Newer 5.x IndexService.buildIndex also indexes TAGS as topic#T#tags (buildKey(topic, tags, "T"));
        // detected on the IndexService class itself rather than assumed from a version number.
        String tags = req.getPropertiesMap() == null ? null : req.getPropertiesMap().get(MessageConst.PROPERTY_TAGS);
        if (INDEXES_TAGS && tags != null && tags.length() > 0) {
            raw.add(req.getTopic() + "#T#" + tags);
        }
        for (String k : raw) {
            int h = Math.abs(k.hashCode());   // IndexFile.indexKeyHashMethod
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("key", k);
            e.put("hash", h < 0 ? 0 : h);
            keys.add(e);
        }
        return keys;
    }

    static void putHost(Map<String, Object> r, String name, SocketAddress a) {
        InetSocketAddress s = (InetSocketAddress) a;
        r.put(name + "_address", s.getAddress().getAddress());
        r.put(name + "_port", s.getPort());
    }

    /** StoreCheckpoint's own reading of the checkpoint file (opened on a copy: the class maps it rw). */
    static Map<String, Object> checkpoint(Path storeDir, Path scratch) throws Exception {
        Path src = storeDir.resolve("checkpoint");
        Map<String, Object> c = new LinkedHashMap<>();
        if (!Files.exists(src)) {
            return null;
        }
        Path copy = scratch.resolve("checkpoint-copy");
        Files.copy(src, copy, StandardCopyOption.REPLACE_EXISTING);
        StoreCheckpoint cp = new StoreCheckpoint(copy.toString());
        for (String g : new String[] {"getPhysicMsgTimestamp", "getLogicsMsgTimestamp", "getIndexMsgTimestamp",
            "getMasterFlushedOffset", "getConfirmPhyOffset", "getLogicsPhysicalOffset", "getMinTimestamp",
            "getMinTimestampIndex"}) {
            Object v = Rmq.getter(cp, g);
            if (v != null) {
                c.put(Character.toLowerCase(g.charAt(3)) + g.substring(4), v);
            }
        }
        cp.shutdown();
        return c;
    }

    // ---------------------------------------------------------------------------------------- recover

    /**
     * Real recovery on a copy: open DefaultMessageStore on it (load() recovers, normally or abnormally
     * depending on the abort file), start it, let dispatch catch up, shut down cleanly, and report
     * what RocketMQ decided. With --rebuild the copy's consumequeue/ and index/ are removed first, so
     * RocketMQ rebuilds them from the CommitLog (5.x needs recheckReputOffsetFromCq for that). The
     * rebuild command is the same with the SETTINGS it is given and a quiet store (see quiet()).
     */
    static void recover(Args args) throws Exception {
        recover(args, args.has("rebuild"), false);
    }

    static void recover(Args args, boolean rebuild, boolean quiet) throws Exception {
        Path storeDir = Paths.get(args.get("store"));
        Path work = Paths.get(args.get("work"));
        deleteTree(work);
        copyTree(storeDir, work);
        if (rebuild) {
            deleteTree(work.resolve("consumequeue"));
            deleteTree(work.resolve("index"));
        }
        if (args.has("abort")) {
            // a broker that died: the copy restarts through abnormal recovery (bench/bench_commands.py)
            Files.write(work.resolve("abort"), new byte[0]);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        out.put("rebuild", rebuild);
        out.put("abort_present", Files.exists(work.resolve("abort")));
        Map<String, String> before = fileDigests(work);

        MessageStoreConfig cfg = config(work.toString(), args);
        if (quiet) {
            quiet(cfg);
        }
        if (Rmq.V5 && rebuild) {
            MessageStoreConfig.class.getMethod("setRecheckReputOffsetFromCq", boolean.class).invoke(cfg, true);
        }
        DefaultMessageStore store = Rmq.newStore(cfg);
        long loading = System.nanoTime();
        boolean loaded = load(store, out);
        // load() is the recovery: what a restart costs before the broker serves (bench/bench_commands.py)
        out.put("load_seconds", (System.nanoTime() - loading) / 1e9);
        if (loaded) {
            long started = System.nanoTime();
            store.start();
            waitDispatched(store);
            // start-up until dispatch caught up: what a rebuild costs the broker (bench/bench_rebuild.py)
            out.put("dispatch_seconds", (System.nanoTime() - started) / 1e9);
            out.put("commitlog_min_offset", store.getMinPhyOffset());
            out.put("commitlog_max_offset", store.getMaxPhyOffset());
            out.put("confirm_offset", Rmq.getter(store.getCommitLog(), "getConfirmOffset"));
            out.put("queues", queues(store));
            store.shutdown();
        }
        putFileChanges(out, before, fileDigests(work));
        out.put("abort_after_shutdown", Files.exists(work.resolve("abort")));
        out.put("files_after", listFiles(work));
        if (args.has("keep")) {
            Path keep = Paths.get(args.get("keep"));
            deleteTree(keep);
            for (String sub : new String[] {"consumequeue", "index"}) {
                if (Files.exists(work.resolve(sub))) {
                    copyTree(work.resolve(sub), keep.resolve(sub));
                }
            }
        }
        Files.write(Paths.get(args.get("out")), Json.write(out).getBytes(StandardCharsets.UTF_8));
        deleteTree(work);
        log("recovered: loaded=" + loaded + " max=" + out.get("commitlog_max_offset") + " deleted=" + out.get("files_deleted"));
    }

    /**
     * store.load() (recovery), its outcome in out: loaded, load_error when it threw, and
     * dispatched_during_load: the records recovery itself handed to the dispatchers (a probe first in
     * RocketMQ's own dispatcher list). Abnormal recovery dispatches every record from the segment it starts
     * at, so the first of them is that segment's first record: RocketMQ's choice of start file.
     */
    static boolean load(DefaultMessageStore store, Map<String, Object> out) {
        long[] seen = {Long.MAX_VALUE, -1, 0};   // first offset, end offset, records
        CommitLogDispatcher probe = req -> {
            if (req.getMsgSize() > 0) {
                seen[0] = Math.min(seen[0], req.getCommitLogOffset());
                seen[1] = Math.max(seen[1], req.getCommitLogOffset() + req.getMsgSize());
                seen[2]++;
            }
        };
        store.getDispatcherList().addFirst(probe);
        boolean loaded;
        try {
            loaded = store.load();
        } catch (Exception | Error e) {
            loaded = false;
            out.put("load_error", e.toString());
        }
        store.getDispatcherList().remove(probe);
        out.put("loaded", loaded);
        Map<String, Object> dispatched = new LinkedHashMap<>();
        dispatched.put("records", seen[2]);
        dispatched.put("first_physical_offset", seen[2] > 0 ? seen[0] : null);
        dispatched.put("end_physical_offset", seen[2] > 0 ? seen[1] : null);
        out.put("dispatched_during_load", dispatched);
        return loaded;
    }

    /** Every queue of the ConsumeQueue table, in name order, with getMinOffsetInQueue / getMaxOffsetInQueue. */
    static List<Object> queues(DefaultMessageStore store) throws Exception {
        List<Object> queues = new ArrayList<>();
        Map<String, ? extends Map<Integer, ?>> table = store.getConsumeQueueTable();
        for (String topic : new TreeMap<>(table).keySet()) {
            for (Integer qid : new TreeMap<>(table.get(topic)).keySet()) {
                Map<String, Object> q = new LinkedHashMap<>();
                q.put("topic", topic);
                q.put("queue_id", qid);
                q.put("min_offset", store.getMinOffsetInQueue(topic, qid));
                q.put("max_offset", Rmq.maxOffsetInQueue(store, topic, qid));
                queues.add(q);
            }
        }
        return queues;
    }

    /** files_deleted, files_changed, files_created: paths whose digests differ between two fileDigests. */
    static void putFileChanges(Map<String, Object> out, Map<String, String> before, Map<String, String> after) {
        List<String> deleted = new ArrayList<>();
        List<String> changed = new ArrayList<>();
        List<String> created = new ArrayList<>();
        for (String k : before.keySet()) {
            if (!after.containsKey(k)) {
                deleted.add(k);
            } else if (!after.get(k).equals(before.get(k))) {
                changed.add(k);
            }
        }
        for (String k : after.keySet()) {
            if (!before.containsKey(k)) {
                created.add(k);
            }
        }
        out.put("files_deleted", deleted);
        out.put("files_changed", changed);
        out.put("files_created", created);
    }

    // ----------------------------------------------------------------------------------------- expire

    /**
     * Ages the first CommitLog segment (mtime two days back) and lets RocketMQ's own cleaner expire it
     * with fileReservedTime = 24 h, then waits for the ConsumeQueue cleaner to move queue minimums.
     */
    static void expire(Args args) throws Exception {
        Path root = Paths.get(args.get("store"));
        File[] segs = root.resolve("commitlog").toFile().listFiles();
        java.util.Arrays.sort(segs);
        long now = System.currentTimeMillis();
        for (int i = 0; i < segs.length; i++) {
            Files.setLastModifiedTime(segs[i].toPath(), FileTime.fromMillis(i == 0 ? now - 48 * 3600_000L : now));
        }
        MessageStoreConfig cfg = config(root.toString());
        cfg.setFileReservedTime(24);
        DefaultMessageStore store = open(cfg);
        store.start();
        store.executeDeleteFilesManually();
        // the cleaner's first run is 60 s after start() (DefaultMessageStore.addScheduleTask): a 60 s deadline
        // left only start()'s own milliseconds of margin, too few for a JVM run at a low priority on a busy machine
        long deadline = System.currentTimeMillis() + 180_000;
        while (store.getMinPhyOffset() == 0 && System.currentTimeMillis() < deadline) {
            Thread.sleep(200);
        }
        if (store.getMinPhyOffset() == 0) {
            throw new IllegalStateException("RocketMQ's cleaner did not expire the first segment within 180 s");
        }
        Thread.sleep(3000);   // the ConsumeQueue cleaner runs right after, in the same scheduled task
        log("expired: CommitLog min offset now " + store.getMinPhyOffset());
        store.shutdown();
    }

    // ---------------------------------------------------------------------------------------- offsets

    /** Persists config/consumerOffset.json twice (zeros first) so the .bak holds an older version. */
    static void offsets(Args args) throws Exception {
        Path root = Paths.get(args.get("store"));
        Map<String, Map<Integer, Long>> table = new TreeMap<>();
        Map<String, Map<Integer, Long>> zeros = new TreeMap<>();
        for (String s : args.all("set")) {
            String[] kv = s.split("=");
            int slash = kv[0].lastIndexOf('/');
            String key = kv[0].substring(0, slash);
            int qid = Integer.parseInt(kv[0].substring(slash + 1));
            table.computeIfAbsent(key, k -> new TreeMap<>()).put(qid, Long.parseLong(kv[1]));
            zeros.computeIfAbsent(key, k -> new TreeMap<>()).put(qid, 0L);
        }
        String path = root.resolve("config").resolve("consumerOffset.json").toString();
        ConsumerOffsets.create(path, zeros).persist();
        ConsumerOffsets.create(path, table).persist();
        log("persisted " + table.size() + " topic@group entries to " + path);
    }

    // ----------------------------------------------------------------------------------------- config

    /** The broker's other config files (ConfigFiles); --delay: the 5.x ScheduleMessageService progress. */
    static void config(Args args) throws Exception {
        Map<Integer, Long> delay = new TreeMap<>();
        for (String s : args.all("delay")) {
            String[] kv = s.split("=");
            delay.put(Integer.parseInt(kv[0]), Long.parseLong(kv[1]));
        }
        Map<String, Object> given = ConfigFiles.write(Paths.get(args.get("store")), delay);
        Files.write(Paths.get(args.get("out")), Json.write(given).getBytes(StandardCharsets.UTF_8));
        log("persisted config/topics.json, subscriptionGroup.json" + (Rmq.V5 ? ", delayOffset.json" : "")
            + " under " + args.get("store"));
    }

    // ------------------------------------------------------------------------------------------ files

    static List<Object> listFiles(Path root) throws IOException {
        List<Object> out = new ArrayList<>();
        for (Map.Entry<String, String> e : fileDigests(root).entrySet()) {
            Map<String, Object> f = new LinkedHashMap<>();
            f.put("path", e.getKey());
            f.put("size", Files.size(root.resolve(e.getKey())));
            f.put("sha256", e.getValue());
            out.add(f);
        }
        return out;
    }

    static Map<String, String> fileDigests(Path root) throws IOException {
        Map<String, String> out = new TreeMap<>();
        if (!Files.exists(root)) {
            return out;
        }
        try (Stream<Path> s = Files.walk(root)) {
            for (Path p : (Iterable<Path>) s.filter(Files::isRegularFile)::iterator) {
                out.put(root.relativize(p).toString().replace(File.separatorChar, '/'), sha256(Files.readAllBytes(p)));
            }
        }
        return out;
    }

    static String sha256(byte[] data) {
        try {
            StringBuilder sb = new StringBuilder();
            for (byte b : MessageDigest.getInstance("SHA-256").digest(data)) {
                sb.append(String.format("%02x", b & 0xff));
            }
            return sb.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static void copyTree(Path src, Path dst) throws IOException {
        Files.walkFileTree(src, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) throws IOException {
                Files.createDirectories(dst.resolve(src.relativize(dir)));
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
                Files.copy(file, dst.resolve(src.relativize(file)), StandardCopyOption.COPY_ATTRIBUTES);
                return FileVisitResult.CONTINUE;
            }
        });
    }

    static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) {
            return;
        }
        try (Stream<Path> s = Files.walk(p)) {
            for (Path q : (Iterable<Path>) s.sorted(java.util.Comparator.reverseOrder())::iterator) {
                Files.delete(q);
            }
        }
    }

    static void log(String s) {
        System.err.println("[golden] " + s);
    }

    /** command --key value --flag ...; repeated keys accumulate. */
    static final class Args {
        final String command;
        final Map<String, List<String>> values = new HashMap<>();

        Args(String[] argv) {
            if (argv.length == 0) {
                throw new IllegalArgumentException("usage: write|inspect|recover|rebuild|serve-check|expire|offsets|config --store DIR ...");
            }
            command = argv[0];
            for (int i = 1; i < argv.length; i++) {
                if (!argv[i].startsWith("--")) {
                    throw new IllegalArgumentException("unexpected argument " + argv[i]);
                }
                String key = argv[i].substring(2);
                String value = i + 1 < argv.length && !argv[i + 1].startsWith("--") ? argv[++i] : "true";
                values.computeIfAbsent(key, k -> new ArrayList<>()).add(value);
            }
        }

        boolean has(String key) {
            return values.containsKey(key);
        }

        String get(String key) {
            if (!has(key)) {
                throw new IllegalArgumentException(command + ": --" + key + " is required");
            }
            return values.get(key).get(0);
        }

        List<String> all(String key) {
            return values.getOrDefault(key, List.of());
        }
    }
}
