package io.rocketstore.golden;

import java.util.Collection;
import java.util.Map;

/**
 * Minimal JSON serialiser for manifests: maps (insertion order kept), collections, strings, numbers,
 * booleans, null and byte[] (rendered as lowercase hex). Kept here so the manifests look the same
 * whichever fastjson (4.x: 1.x, 5.x: fastjson2) the RocketMQ version brings along.
 */
final class Json {
    private Json() {
    }

    static String write(Object value) {
        StringBuilder sb = new StringBuilder();
        write(sb, value, 0);
        return sb.append('\n').toString();
    }

    private static void write(StringBuilder sb, Object v, int depth) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String) {
            string(sb, (String) v);
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof byte[]) {
            StringBuilder hex = new StringBuilder();
            for (byte b : (byte[]) v) {
                hex.append(String.format("%02x", b & 0xff));
            }
            string(sb, hex.toString());
        } else if (v instanceof Map) {
            Map<?, ?> m = (Map<?, ?>) v;
            if (m.isEmpty()) {
                sb.append("{}");
                return;
            }
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                sb.append(first ? "" : ",").append('\n').append("  ".repeat(depth + 1));
                string(sb, String.valueOf(e.getKey()));
                sb.append(": ");
                write(sb, e.getValue(), depth + 1);
                first = false;
            }
            sb.append('\n').append("  ".repeat(depth)).append('}');
        } else if (v instanceof Collection) {
            // one element per line for maps (records), inline for scalars
            Collection<?> c = (Collection<?>) v;
            boolean nested = !c.isEmpty() && c.iterator().next() instanceof Map;
            sb.append('[');
            boolean first = true;
            for (Object o : c) {
                sb.append(first ? "" : ",");
                if (nested) {
                    sb.append('\n').append("  ".repeat(depth + 1));
                } else if (!first) {
                    sb.append(' ');
                }
                write(sb, o, depth + 1);
                first = false;
            }
            if (nested) {
                sb.append('\n').append("  ".repeat(depth));
            }
            sb.append(']');
        } else {
            string(sb, v.toString());
        }
    }

    private static void string(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            switch (ch) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (ch < 0x20 || (ch >= 0x7f && ch < 0xa0)) {
                        sb.append(String.format("\\u%04x", (int) ch));
                    } else {
                        sb.append(ch);
                    }
            }
        }
        sb.append('"');
    }
}
