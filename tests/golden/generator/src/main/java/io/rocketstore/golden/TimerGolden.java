package io.rocketstore.golden;

import java.io.File;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.store.AppendMessageResult;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.SelectMappedBufferResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.logfile.MappedFile;
import org.apache.rocketmq.store.timer.Slot;
import org.apache.rocketmq.store.timer.TimerCheckpoint;
import org.apache.rocketmq.store.timer.TimerLog;
import org.apache.rocketmq.store.timer.TimerMessageStore;
import org.apache.rocketmq.store.timer.TimerMetrics;
import org.apache.rocketmq.store.timer.TimerWheel;
import org.apache.rocketmq.store.StoreUtil;

/**
 * The timer golden stores (RocketMQ 5.x, {@code timerWheelEnable}): RocketMQ's own DefaultMessageStore with
 * its own TimerMessageStore attached as the broker attaches it (BrokerController: TimerCheckpoint on
 * {@code config/timercheck}, TimerMetrics on {@code config/timermetrics}, dequeue running as on a master).
 * Timer messages are put as the broker's HookUtils.transformTimerMessage turns a producer's
 * {@code TIMER_DELIVER_MS} message into a {@code rmq_sys_wheel_timer} record (that hook lives in the broker,
 * so it is reproduced here line for line). Built only with -Dtimers (pom profile "timers"). Commands:
 *
 * <pre>
 *   write --store DIR --mode clean|crash --out FILE   timers due during the run (delivered by RocketMQ to
 *                                  their real topic) and timers due minutes later (pending); then shut down
 *                                  (clean) or Runtime.halt() (crash). FILE: every send and where it landed.
 *   view  --store DIR --work DIR --out FILE   on a copy: timercheck as on disk, every timerwheel slot and
 *                                  timerlog unit as RocketMQ's TimerWheel/TimerLog read them, then
 *                                  TimerMessageStore.load() (its recover) with dequeue stopped, and the
 *                                  timers it would deliver: the wheel walked from currReadTimeMs as dequeue()
 *                                  walks it, each unit's message read back with StoreUtil.getMessage.
 * </pre>
 */
public final class TimerGolden {
    /** TimerLog segment size: small, so the timerlog rolls over (with its blank unit) several times. */
    static final int TIMERLOG_FILE_SIZE = 1024;
    static final String TOPIC = "TimerTopic";
    static final String PLAIN_TOPIC = "PlainTopic";
    static final int QUEUES = 4;
    static final int PHASE_A = 40;     // every third due within seconds (delivered during the run)
    static final int PHASE_B = 40;     // all due 10-60 minutes later (pending at the end)

    private TimerGolden() {
    }

    public static void main(String[] argv) throws Exception {
        Generator.Args args = new Generator.Args(argv);
        Generator.log("RocketMQ " + Rmq.version() + " timers: " + String.join(" ", argv));
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
        cfg.setTimerWheelEnable(true);
        cfg.setMappedFileSizeTimerLog(TIMERLOG_FILE_SIZE);
        return cfg;
    }

    static String configPath(String root, String name) {
        return root + File.separator + "config" + File.separator + name;
    }

    /** A DefaultMessageStore with a TimerMessageStore attached, both loaded (BrokerController.initialize order). */
    static TimerMessageStore attach(DefaultMessageStore store, MessageStoreConfig cfg) throws Exception {
        String root = cfg.getStorePathRootDir();
        TimerCheckpoint cp = new TimerCheckpoint(configPath(root, "timercheck"));
        TimerMetrics metrics = new TimerMetrics(configPath(root, "timermetrics"));
        TimerMessageStore timers = new TimerMessageStore(store, cfg, cp, metrics, null);
        store.setTimerMessageStore(timers);
        return timers;
    }

    static void write(Generator.Args args) throws Exception {
        String root = args.get("store");
        MessageStoreConfig cfg = config(root);
        DefaultMessageStore store = Rmq.newStore(cfg);
        TimerMessageStore timers = attach(store, cfg);
        if (!store.load() || !timers.load()) {
            throw new IllegalStateException("RocketMQ refused to load " + root);
        }
        store.start();
        timers.start(true);
        Generator.Writer w = new Generator.Writer(store);
        List<Object> sends = new ArrayList<>();
        long t0 = System.currentTimeMillis();
        for (int i = 0; i < PHASE_A + PHASE_B; i++) {
            if (i == PHASE_A) {
                waitEnqueued(timers, store);
                Thread.sleep(6000);   // the short timers fall due and are delivered
            }
            long delayMs = i < PHASE_A && i % 3 == 0 ? 1500 + 100L * (i % 7) : 600_000L + 45_000L * i;
            Map<String, Object> sent = sendTimer(w, cfg, i, System.currentTimeMillis() + delayMs, null);
            sends.add(sent);
            if (i >= PHASE_A && i % 10 == 5) {
                // a cancel, as RecallMessageProcessor writes one: same due time, TIMER_DEL_UNIQKEY = the timer's
                // UNIQ_KEY (appendTopicForTimerDeleteKey=false)
                sends.add(sendTimer(w, cfg, i, (Long) sent.get("deliver_ms"), (String) sent.get("uniq_key")));
            }
            if (i % 5 == 2) {
                MessageExt plain = w.message(PLAIN_TOPIC, i % QUEUES, w.body(i, 40));
                MessageAccessor.putProperty(plain, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                    MessageClientIDSetter.createUniqID());
                w.put(plain);
            }
        }
        waitEnqueued(timers, store);
        Generator.waitDispatched(store);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        out.put("started_ms", t0);
        out.put("sends", sends);
        out.put("commitlog_max_offset", store.getMaxPhyOffset());
        Files.write(Paths.get(args.get("out")), Json.write(out).getBytes(StandardCharsets.UTF_8));
        Generator.log("wrote " + sends.size() + " timers, CommitLog max offset " + store.getMaxPhyOffset());
        if (args.get("mode").equals("crash")) {
            Generator.log("halting without shutdown");
            Runtime.getRuntime().halt(0);
        }
        timers.shutdown();   // BrokerController.shutdown: the timer store first
        store.shutdown();
    }

    /** HookUtils.transformTimerMessage (rocketmq-broker 5.5.1) on a TIMER_DELIVER_MS message, then put. */
    static Map<String, Object> sendTimer(Generator.Writer w, MessageStoreConfig cfg, int i, long deliverMs,
                                         String deletes) throws Exception {
        int queueId = i % QUEUES;
        MessageExt m = w.message(TOPIC, queueId, w.body(i, 30 + i % 50));
        String uniq = MessageClientIDSetter.createUniqID();
        MessageAccessor.putProperty(m, MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq);
        MessageAccessor.putProperty(m, MessageConst.PROPERTY_KEYS, "timer-" + i);
        if (i % 4 == 1) {
            MessageAccessor.putProperty(m, MessageConst.PROPERTY_TAGS, "TagT");
        }
        MessageAccessor.putProperty(m, MessageConst.PROPERTY_TIMER_DELIVER_MS, String.valueOf(deliverMs));
        if (deletes != null) {
            MessageAccessor.putProperty(m, MessageConst.PROPERTY_TIMER_DEL_UNIQKEY, deletes);
        }
        // transformTimerMessage
        int precision = cfg.getTimerPrecisionMs();
        long outMs = deliverMs % precision == 0 ? deliverMs - precision : deliverMs / precision * precision;
        MessageAccessor.putProperty(m, MessageConst.PROPERTY_TIMER_OUT_MS, String.valueOf(outMs));
        MessageAccessor.putProperty(m, MessageConst.PROPERTY_REAL_TOPIC, m.getTopic());
        MessageAccessor.putProperty(m, MessageConst.PROPERTY_REAL_QUEUE_ID, String.valueOf(m.getQueueId()));
        m.setTopic(TimerMessageStore.TIMER_TOPIC);
        m.setQueueId(0);
        AppendMessageResult r = w.put(m);
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("i", i);
        s.put("deletes", deletes);
        s.put("uniq_key", uniq);
        s.put("real_topic", TOPIC);
        s.put("real_queue_id", queueId);
        s.put("deliver_ms", deliverMs);
        s.put("timer_out_ms", outMs);
        s.put("physical_offset", r.getWroteOffset());
        s.put("size", r.getWroteBytes());
        return s;
    }

    static void waitEnqueued(TimerMessageStore timers, DefaultMessageStore store) throws Exception {
        Generator.waitDispatched(store);
        long deadline = System.currentTimeMillis() + 60_000;
        while (timers.getEnqueueBehindMessages() > 0 || timers.getQueueOffset()
            < Rmq.maxOffsetInQueue(store, TimerMessageStore.TIMER_TOPIC, 0)) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("the timer store did not enqueue within 60 s");
            }
            Thread.sleep(50);
        }
        Thread.sleep(300);
    }

    static void view(Generator.Args args) throws Exception {
        Path src = Paths.get(args.get("store"));
        Path work = Paths.get(args.get("work"));
        Generator.deleteTree(work);
        Generator.copyTree(src, work);
        String root = work.toAbsolutePath().toString();
        MessageStoreConfig cfg = config(root);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        out.put("timer_precision_ms", cfg.getTimerPrecisionMs());
        out.put("timerlog_file_size", cfg.getMappedFileSizeTimerLog());
        int slotsTotal = TimerMessageStore.TIMER_WHEEL_TTL_DAY * TimerMessageStore.DAY_SECS;
        out.put("timer_wheel_slots", slotsTotal * 2);

        // config/timercheck as on disk (TimerCheckpoint's own reading of it)
        TimerCheckpoint onDisk = new TimerCheckpoint(configPath(root, "timercheck"));
        Map<String, Object> check = new LinkedHashMap<>();
        check.put("last_read_time_ms", onDisk.getLastReadTimeMs());
        check.put("last_timerlog_flush_pos", onDisk.getLastTimerLogFlushPos());
        check.put("last_timer_queue_offset", onDisk.getLastTimerQueueOffset());
        check.put("master_timer_queue_offset", onDisk.getMasterTimerQueueOffset());
        check.put("data_version_state_version", onDisk.getDataVersion().getStateVersion());
        check.put("data_version_timestamp", onDisk.getDataVersion().getTimestamp());
        check.put("data_version_counter", onDisk.getDataVersion().getCounter().get());
        onDisk.shutdown();
        out.put("timercheck", check);

        // the timerwheel file, every non-zero slot (TimerWheel.getRawSlot, slot index i <-> timeMs i * precision)
        TimerWheel rawWheel = new TimerWheel(TimerMessageStore.getTimerWheelPath(root), slotsTotal, cfg.getTimerPrecisionMs());
        List<Object> slots = new ArrayList<>();
        for (int i = 0; i < slotsTotal * 2; i++) {
            Slot s = rawWheel.getRawSlot((long) i * cfg.getTimerPrecisionMs());
            if (s.timeMs != 0 || s.firstPos != 0 || s.lastPos != 0 || s.num != 0 || s.magic != 0) {
                Map<String, Object> r = new LinkedHashMap<>();
                r.put("index", i);
                r.put("time_ms", s.timeMs);
                r.put("first_pos", s.firstPos);
                r.put("last_pos", s.lastPos);
                r.put("num", s.num);
                r.put("magic", s.magic);
                slots.add(r);
            }
        }
        rawWheel.shutdown(false);
        out.put("wheel_slots", slots);

        // every timerlog unit, walked as TimerMessageStore.recoverAndRevise walks a file
        TimerLog rawLog = new TimerLog(TimerMessageStore.getTimerLogPath(root), cfg.getMappedFileSizeTimerLog());
        rawLog.load();
        List<Object> units = new ArrayList<>();
        List<Object> files = new ArrayList<>();
        for (MappedFile f : rawLog.getMappedFileQueue().getMappedFiles()) {
            SelectMappedBufferResult sbr = f.selectMappedBuffer(0, f.getFileSize());
            ByteBuffer bf = sbr.getByteBuffer();
            int position = 0;
            String stop = "end of file";
            for (; position + TimerLog.UNIT_SIZE <= sbr.getSize(); position += TimerLog.UNIT_SIZE) {
                bf.position(position);
                int size = bf.getInt();
                long prev = bf.getLong();
                int magic = bf.getInt();
                if (magic == TimerLog.BLANK_MAGIC_CODE) {
                    stop = "blank";
                    break;
                }
                if (!TimerMessageStore.isMagicOK(magic) || size != TimerLog.UNIT_SIZE) {
                    stop = "not a unit";
                    break;
                }
                Map<String, Object> u = new LinkedHashMap<>();
                u.put("offset", f.getFileFromOffset() + position);
                u.put("size", size);
                u.put("prev_pos", prev);
                u.put("magic", magic);
                long writeTime = bf.getLong();
                int delay = bf.getInt();
                u.put("write_time_ms", writeTime);
                u.put("delay_ms", delay);
                u.put("delayed_time_ms", writeTime + delay);
                u.put("offset_py", bf.getLong());
                u.put("size_py", bf.getInt());
                u.put("topic_hash", bf.getInt());
                u.put("reserved", bf.getLong());
                units.add(u);
            }
            sbr.release();
            Map<String, Object> fr = new LinkedHashMap<>();
            fr.put("file", new File(f.getFileName()).getName());
            fr.put("file_from_offset", f.getFileFromOffset());
            fr.put("units_end", position);
            fr.put("stop", stop);
            files.add(fr);
        }
        rawLog.shutdown();
        out.put("timerlog_files", files);
        out.put("timerlog_units", units);

        // RocketMQ's restart: store load, timer store load (recover), dequeue not started
        DefaultMessageStore store = Rmq.newStore(config(root));
        TimerMessageStore timers = attach(store, cfg);
        boolean loaded = store.load() && timers.load();
        out.put("loaded", loaded);
        store.start();   // getMessage is refused before start; the timer store itself is not started
        out.put("commitlog_max_offset", store.getMaxPhyOffset());
        out.put("timer_queue_max_offset", Rmq.maxOffsetInQueue(store, TimerMessageStore.TIMER_TOPIC, 0));
        out.put("recovered_curr_read_time_ms", timers.getCurrReadTimeMs());
        out.put("recovered_curr_queue_offset", timers.getQueueOffset());
        out.put("recovered_timerlog_end", timers.getTimerLog().getMappedFileQueue().getFlushedWhere());
        out.put("timing_count", timers.getTimerMetrics().getTimingCount(TOPIC));
        ByteBuffer buf = ByteBuffer.allocateDirect(cfg.getMaxMessageSize() + 64 * 1024);

        // dequeue(): each slot from currReadTimeMs on, its chain lastPos -> prevPos, each unit's message
        List<Object> pending = new ArrayList<>();
        List<Object> cancels = new ArrayList<>();
        List<Object> cancelled = new ArrayList<>();
        TimerWheel wheel = timers.getTimerWheel();
        TimerLog log = timers.getTimerLog();
        int precision = cfg.getTimerPrecisionMs();
        long from = timers.getCurrReadTimeMs();
        for (long k = 0; k < (long) slotsTotal * 2; k++) {
            long t = from + k * precision;
            Slot slot = wheel.getSlot(t);
            if (slot.timeMs == -1) {
                continue;
            }
            List<Map<String, Object>> chain = new ArrayList<>();
            long pos = slot.lastPos;
            while (pos != -1) {
                SelectMappedBufferResult sbr = log.getWholeBuffer(pos);
                if (sbr == null) {
                    break;
                }
                ByteBuffer bf = sbr.getByteBuffer();
                bf.position((int) (pos % cfg.getMappedFileSizeTimerLog()));
                bf.getInt();
                long prev = bf.getLong();
                int magic = bf.getInt();
                long enqueueTime = bf.getLong();
                long delayed = bf.getInt() + enqueueTime;
                long offsetPy = bf.getLong();
                int sizePy = bf.getInt();
                sbr.release();
                Map<String, Object> p = new LinkedHashMap<>();
                p.put("slot_time_ms", slot.timeMs);
                p.put("timerlog_offset", pos);
                p.put("magic", magic);
                p.put("delayed_time_ms", delayed);
                p.put("offset_py", offsetPy);
                p.put("size_py", sizePy);
                MessageExt msg = StoreUtil.getMessage(offsetPy, sizePy, store, buf);
                p.put("message_found", msg != null);
                if (msg != null) {
                    p.put("real_topic", msg.getProperty(MessageConst.PROPERTY_REAL_TOPIC));
                    p.put("real_queue_id", msg.getProperty(MessageConst.PROPERTY_REAL_QUEUE_ID));
                    p.put("uniq_key", msg.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX));
                    p.put("timer_out_ms", msg.getProperty(MessageConst.PROPERTY_TIMER_OUT_MS));
                    p.put("keys", msg.getKeys());
                    p.put("del_key", msg.getProperty(MessageConst.PROPERTY_TIMER_DEL_UNIQKEY));
                }
                chain.add(0, p);   // dequeue: normalMsgStack.addFirst, delivered oldest first
                pos = prev;
            }
            // dequeue: the slot's DELETE units (not ROLL) first, each adding its TIMER_DEL_UNIQKEY to the slot's
            // delete list; a normal unit whose UNIQ_KEY (buildDeleteKey, appendTopicForTimerDeleteKey=false) is
            // in it is not delivered (TimerDequeueGetMessageService)
            java.util.Set<String> deleted = new java.util.HashSet<>();
            for (Map<String, Object> p : chain) {
                int magic = (Integer) p.get("magic");
                if (timers.needDelete(magic) && !timers.needRoll(magic) && p.get("del_key") != null) {
                    deleted.add((String) p.get("del_key"));
                }
            }
            for (Map<String, Object> p : chain) {
                int magic = (Integer) p.get("magic");
                if (timers.needDelete(magic) && !timers.needRoll(magic)) {
                    cancels.add(p);
                } else if (p.get("uniq_key") != null && deleted.contains(p.get("uniq_key"))) {
                    cancelled.add(p);
                } else {
                    pending.add(p);
                }
            }
        }
        out.put("pending", pending);
        out.put("cancel_units", cancels);
        out.put("cancelled", cancelled);

        // timer messages in rmq_sys_wheel_timer/0 past currQueueOffset: enqueued on restart (the rest of the backlog)
        List<Object> backlog = new ArrayList<>();
        long maxQ = Rmq.maxOffsetInQueue(store, TimerMessageStore.TIMER_TOPIC, 0);
        for (long q = timers.getQueueOffset(); q < maxQ; q++) {
            GetMessageResult r = store.getMessage("golden", TimerMessageStore.TIMER_TOPIC, 0, q, 1, null);
            for (SelectMappedBufferResult b : r.getMessageMapedList()) {
                MessageExt msg = org.apache.rocketmq.common.message.MessageDecoder.decode(b.getByteBuffer(), true, false);
                Map<String, Object> e = new LinkedHashMap<>();
                e.put("queue_offset", q);
                e.put("offset_py", msg.getCommitLogOffset());
                e.put("uniq_key", msg.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX));
                e.put("timer_out_ms", msg.getProperty(MessageConst.PROPERTY_TIMER_OUT_MS));
                backlog.add(e);
            }
            r.release();
        }
        out.put("queue_backlog", backlog);

        // delivered: what the real topic's queues hold (RocketMQ's getMessage)
        List<Object> delivered = new ArrayList<>();
        for (int q = 0; q < QUEUES; q++) {
            long max = Rmq.maxOffsetInQueue(store, TOPIC, q);
            for (long o = 0; o < max; o++) {
                GetMessageResult r = store.getMessage("golden", TOPIC, q, o, 1, null);
                for (SelectMappedBufferResult b : r.getMessageMapedList()) {
                    MessageExt msg = org.apache.rocketmq.common.message.MessageDecoder.decode(b.getByteBuffer(), true, false);
                    Map<String, Object> e = new LinkedHashMap<>();
                    e.put("queue_id", q);
                    e.put("queue_offset", o);
                    e.put("physical_offset", msg.getCommitLogOffset());
                    e.put("uniq_key", msg.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX));
                    e.put("timer_out_ms", msg.getProperty(MessageConst.PROPERTY_TIMER_OUT_MS));
                    delivered.add(e);
                }
                r.release();
            }
        }
        out.put("delivered", delivered);
        timers.shutdown();
        store.shutdown();
        Files.write(Paths.get(args.get("out")), Json.write(out).getBytes(StandardCharsets.UTF_8));
        Generator.deleteTree(work);
        Generator.log("viewed: " + units.size() + " timerlog units, " + slots.size() + " wheel slots, "
            + pending.size() + " pending, " + backlog.size() + " in the queue backlog, " + delivered.size() + " delivered");
    }
}
