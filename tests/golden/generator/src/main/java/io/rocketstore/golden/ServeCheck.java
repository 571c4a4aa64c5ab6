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

import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.MessageFilter;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.SelectMappedBufferResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * serve-check: does RocketMQ accept a store's ConsumeQueues and IndexFiles, and what does it answer from them?
 *
 * <pre>
 *   serve-check --store DIR --queries FILE --out FILE [SETTINGS]
 * </pre>
 *
 * Opens DIR with DefaultMessageStore as a broker does (load(): normal or abnormal recovery, as the abort file
 * says; start(): dispatch of whatever the ConsumeQueues lack; waits until dispatch caught up), then answers
 * every query of FILE (a JSON list) with RocketMQ's own read API, and shuts down cleanly. The store is
 * opened in place and written to like a broker writes to it (checkpoint, lock, on 4.x a re-dispatch from
 * the ConsumeQueues' end): run it on a copy. The store is quiet (Generator.quiet): 4.x delivers no delayed
 * message, so the CommitLog stays as it is. Queries:
 *
 * <pre>
 *   {"op": "get", "topic": T, "queue_id": Q, "queue_offset": N [, "max_msg_nums": 1] [, "group": G]}
 *       getMessage(group, topic, queueId, queueOffset, maxMsgNums, null): status, next/min/max offsets, and
 *       per message returned its physical offset and size and how MessageDecoder reads the record there
 *   {"op": "query", "topic": T, "key": K [, "max_num": 64] [, "begin": 0] [, "end": Long.MAX_VALUE]
 *    [, "index_type": "T"]}
 *       queryMessage(topic, key, maxNum, begin, end) (index_type: the 5.x overload that queries
 *       topic#T#key): the physical offsets of the records returned (the PHYSICALOFFSET each stores; 5.x
 *       also start_offsets, where RocketMQ read them), in RocketMQ's order
 *   {"op": "offsets", "topic": T, "queue_id": Q}
 *       getMinOffsetInQueue / getMaxOffsetInQueue
 * </pre>
 *
 * FILE out: {rocketmq_version, loaded, load_seconds (load(): the recovery), restart_seconds (load() + start()
 * until dispatch caught up), commitlog_{min,max}_offset, queues_after_load and queues (every queue
 * of the ConsumeQueue table after load() and after start(), with min and max offsets), answers (one per
 * query, in order), files_{deleted,changed,created} (paths relative to DIR, between before load() and
 * after shutdown())}.
 */
final class ServeCheck {
    static final String GROUP = "golden_serve_check";

    private ServeCheck() {
    }

    @SuppressWarnings("unchecked")
    static void run(Generator.Args args) throws Exception {
        Path storeDir = Paths.get(args.get("store"));
        List<Object> queries = (List<Object>) MiniJson.parse(
            new String(Files.readAllBytes(Paths.get(args.get("queries"))), StandardCharsets.UTF_8));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        Map<String, String> before = Generator.fileDigests(storeDir);

        MessageStoreConfig cfg = Generator.quiet(Generator.config(storeDir.toString(), args));
        DefaultMessageStore store = Rmq.newStore(cfg);
        long started = System.nanoTime();
        boolean loaded = Generator.load(store, out);
        // load() is the recovery; start() until dispatch caught up completes it: a restart until the broker
        // serves everything (bench/bench_recovery.py times it)
        out.put("load_seconds", (System.nanoTime() - started) / 1e9);
        if (loaded) {
            out.put("queues_after_load", Generator.queues(store));
            store.start();
            Generator.waitDispatched(store);
            out.put("restart_seconds", (System.nanoTime() - started) / 1e9);
            out.put("commitlog_min_offset", store.getMinPhyOffset());
            out.put("commitlog_max_offset", store.getMaxPhyOffset());
            out.put("queues", Generator.queues(store));
            List<Object> answers = new ArrayList<>();
            for (Object q : queries) {
                answers.add(answer(store, (Map<String, Object>) q));
            }
            out.put("answers", answers);
            store.shutdown();
        }
        Generator.putFileChanges(out, before, Generator.fileDigests(storeDir));
        Files.write(Paths.get(args.get("out")), Json.write(out).getBytes(StandardCharsets.UTF_8));
        Generator.log("serve-check: loaded=" + loaded + ", " + queries.size() + " queries answered");
    }

    static Map<String, Object> answer(DefaultMessageStore store, Map<String, Object> q) throws Exception {
        String op = (String) q.get("op");
        String topic = (String) q.get("topic");
        Map<String, Object> a = new LinkedHashMap<>();
        switch (op) {
            case "get": {
                int queueId = num(q, "queue_id", null).intValue();
                long offset = num(q, "queue_offset", null).longValue();
                int max = num(q, "max_msg_nums", 1L).intValue();
                String group = q.containsKey("group") ? (String) q.get("group") : GROUP;
                GetMessageResult r = store.getMessage(group, topic, queueId, offset, max, (MessageFilter) null);
                if (r == null) {
                    a.put("status", null);
                    break;
                }
                a.put("status", r.getStatus() == null ? null : r.getStatus().name());
                a.put("next_begin_offset", r.getNextBeginOffset());
                a.put("min_offset", r.getMinOffset());
                a.put("max_offset", r.getMaxOffset());
                List<Object> messages = new ArrayList<>();
                for (SelectMappedBufferResult sbr : r.getMessageMapedList()) {
                    messages.add(describe(sbr));
                }
                a.put("messages", messages);
                r.release();
                break;
            }
            case "query": {
                String key = (String) q.get("key");
                int maxNum = num(q, "max_num", 64L).intValue();
                long begin = num(q, "begin", 0L).longValue();
                long end = num(q, "end", Long.MAX_VALUE).longValue();
                String indexType = (String) q.get("index_type");
                QueryMessageResult r = indexType == null
                    ? store.queryMessage(topic, key, maxNum, begin, end)
                    : Rmq.queryMessage(store, topic, key, maxNum, begin, end, indexType);
                // 4.x hands out the records' bytes only: where each lies is the PHYSICALOFFSET it stores (as a
                // client reads it); 5.x also keeps the mapped results, whose start is where RocketMQ read
                List<Object> offsets = new ArrayList<>();
                for (ByteBuffer buf : r.getMessageBufferList()) {
                    MessageExt ext = MessageDecoder.decode(buf.slice(), false, false, false);
                    offsets.add(ext == null ? null : ext.getCommitLogOffset());
                }
                a.put("physical_offsets", offsets);
                Object mapped = Rmq.getter(r, "getMessageMapedList");
                if (mapped != null) {
                    List<Object> starts = new ArrayList<>();
                    for (Object sbr : (List<?>) mapped) {
                        starts.add(((SelectMappedBufferResult) sbr).getStartOffset());
                    }
                    a.put("start_offsets", starts);
                }
                a.put("index_last_update_phy_offset", r.getIndexLastUpdatePhyoffset());
                a.put("index_last_update_timestamp", r.getIndexLastUpdateTimestamp());
                r.release();
                break;
            }
            case "offsets": {
                int queueId = num(q, "queue_id", null).intValue();
                a.put("min_offset", store.getMinOffsetInQueue(topic, queueId));
                a.put("max_offset", Rmq.maxOffsetInQueue(store, topic, queueId));
                break;
            }
            default:
                throw new IllegalArgumentException("serve-check: unknown query op " + op);
        }
        return a;
    }

    /** A record getMessage returned: where it is, and what MessageDecoder reads there. */
    static Map<String, Object> describe(SelectMappedBufferResult sbr) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("physical_offset", sbr.getStartOffset());
        m.put("size", sbr.getSize());
        ByteBuffer buf = sbr.getByteBuffer().slice();
        MessageExt ext = MessageDecoder.decode(buf, false, false, false);
        if (ext == null) {
            m.put("decoded", false);
            return m;
        }
        m.put("store_size", ext.getStoreSize());
        m.put("topic", ext.getTopic());
        m.put("queue_id", ext.getQueueId());
        m.put("queue_offset", ext.getQueueOffset());
        m.put("commitlog_offset", ext.getCommitLogOffset());
        m.put("msg_id", ext.getMsgId());
        return m;
    }

    static Number num(Map<String, Object> q, String name, Long dflt) {
        Object v = q.get(name);
        if (v == null) {
            if (dflt == null) {
                throw new IllegalArgumentException("serve-check: query " + q + " lacks " + name);
            }
            return dflt;
        }
        return (Number) v;
    }

    /** A small JSON reader for the query file (objects, arrays, strings, integers, true/false/null). */
    static final class MiniJson {
        private final String s;
        private int i;

        private MiniJson(String s) {
            this.s = s;
        }

        static Object parse(String text) {
            MiniJson p = new MiniJson(text);
            Object v = p.value();
            p.ws();
            if (p.i != p.s.length()) {
                throw p.error("trailing characters");
            }
            return v;
        }

        private Object value() {
            ws();
            if (i >= s.length()) {
                throw error("unexpected end");
            }
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++;
                ws();
                if (peek('}')) {
                    return m;
                }
                do {
                    ws();
                    String k = string();
                    ws();
                    expect(':');
                    m.put(k, value());
                    ws();
                } while (peek(','));
                expect('}');
                return m;
            }
            if (c == '[') {
                List<Object> l = new ArrayList<>();
                i++;
                ws();
                if (peek(']')) {
                    return l;
                }
                do {
                    l.add(value());
                    ws();
                } while (peek(','));
                expect(']');
                return l;
            }
            if (c == '"') {
                return string();
            }
            if (s.startsWith("true", i)) {
                i += 4;
                return Boolean.TRUE;
            }
            if (s.startsWith("false", i)) {
                i += 5;
                return Boolean.FALSE;
            }
            if (s.startsWith("null", i)) {
                i += 4;
                return null;
            }
            int start = i;
            while (i < s.length() && "+-0123456789".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            if (start == i || (i < s.length() && ".eE".indexOf(s.charAt(i)) >= 0)) {
                throw error("only integers are supported");
            }
            return Long.parseLong(s.substring(start, i));
        }

        private String string() {
            expect('"');
            StringBuilder sb = new StringBuilder();
            while (true) {
                if (i >= s.length()) {
                    throw error("unterminated string");
                }
                char c = s.charAt(i++);
                if (c == '"') {
                    return sb.toString();
                }
                if (c != '\\') {
                    sb.append(c);
                    continue;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case '"': case '\\': case '/': sb.append(e); break;
                    case 'b': sb.append('\b'); break;
                    case 'f': sb.append('\f'); break;
                    case 'n': sb.append('\n'); break;
                    case 'r': sb.append('\r'); break;
                    case 't': sb.append('\t'); break;
                    case 'u': sb.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                    default: throw error("bad escape \\" + e);
                }
            }
        }

        private void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        private boolean peek(char c) {
            if (i < s.length() && s.charAt(i) == c) {
                i++;
                return true;
            }
            return false;
        }

        private void expect(char c) {
            if (!peek(c)) {
                throw error("expected '" + c + "'");
            }
        }

        private IllegalArgumentException error(String what) {
            return new IllegalArgumentException("query file: " + what + " at character " + i);
        }
    }
}
