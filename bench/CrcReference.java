import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import java.util.zip.CRC32;

/**
 * JVM reference for bench/bench_verify.py: the BODYCRC audit of a whole CommitLog, one thread, the way
 * RocketMQ's recovery checks a record (CommitLog.checkMessageAndReturnSize, docs/format/commitlog.md):
 * every segment mapped READ_ONLY, record by record by TOTALSIZE, the body read into a scratch array and
 * checked with java.util.zip.CRC32 (UtilAll.crc32), the inner lengths checked against TOTALSIZE. Unlike
 * recovery it counts CRC failures and goes on. Layout: rocketstore_spark/codec/commitlog.py.
 *
 *     java -cp bench/out/java CrcReference STORE/commitlog [runs]
 *
 * Prints one JSON line per run: {"records": N, "crc_failures": N, "damaged": N, "bytes": N, "ms": X}.
 */
public final class CrcReference {
    static final int MAGIC_V1 = 0xDAA320A7;
    static final int MAGIC_V2 = 0xDAA320AB;
    static final int BLANK_MAGIC = 0xCBD43194;
    static final int POS_MAGIC = 4;
    static final int POS_BODY_CRC = 8;
    static final int POS_SYS_FLAG = 36;
    static final int POS_BODY_BH_SH = 72;          // + born host length + store host length
    static final int FLAG_BORNHOST_V6 = 0x10;
    static final int FLAG_STOREHOST_V6 = 0x20;

    long records, crcFailures, damaged, bytes;
    final CRC32 crc = new CRC32();
    byte[] scratch = new byte[1 << 16];

    void segment(Path path) throws IOException {
        try (FileChannel ch = FileChannel.open(path, StandardOpenOption.READ)) {
            MappedByteBuffer buf = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
            bytes += ch.size();
            int limit = buf.limit();
            int p = 0;
            while (p + 8 <= limit) {
                int total = buf.getInt(p);
                int magic = buf.getInt(p + POS_MAGIC);
                if (total == 0 || magic == BLANK_MAGIC) {
                    return;                                     // zero fill (end of the log) or BLANK
                }
                boolean message = magic == MAGIC_V1 || magic == MAGIC_V2;
                if (!message || total < 0 || total > limit - p || !record(buf, p, total, magic)) {
                    damaged++;                                  // where recovery would truncate
                    return;
                }
                records++;
                p += total;
            }
        }
    }

    /** One message record at p: BODYCRC verdict counted; false when its lengths do not add up. */
    boolean record(ByteBuffer buf, int p, int total, int magic) {
        if (total < POS_BODY_BH_SH + 16 + 3) {
            return false;
        }
        int sysFlag = buf.getInt(p + POS_SYS_FLAG);
        int bh = (sysFlag & FLAG_BORNHOST_V6) != 0 ? 20 : 8;
        int sh = (sysFlag & FLAG_STOREHOST_V6) != 0 ? 20 : 8;
        int bodyPos = POS_BODY_BH_SH + bh + sh;
        if (bodyPos + 3 > total) {
            return false;
        }
        int bodyLen = buf.getInt(p + bodyPos - 4);
        int topicLenSize = magic == MAGIC_V1 ? 1 : 2;
        if (bodyLen < 0 || (long) bodyPos + bodyLen + topicLenSize + 2 > total) {
            return false;
        }
        if (bodyLen > 0) {
            if (bodyLen > scratch.length) {
                scratch = new byte[Math.max(bodyLen, scratch.length * 2)];
            }
            buf.get(p + bodyPos, scratch, 0, bodyLen);
            crc.reset();
            crc.update(scratch, 0, bodyLen);
            if ((int) (crc.getValue() & 0x7FFFFFFF) != buf.getInt(p + POS_BODY_CRC)) {
                crcFailures++;
            }
        }
        int q = p + bodyPos + bodyLen;
        int topicLen = topicLenSize == 1 ? buf.get(q) : buf.getShort(q);
        int propsPos = bodyPos + bodyLen + topicLenSize + topicLen;
        if (topicLen < 0 || propsPos + 2 > total) {
            return false;
        }
        int propsLen = buf.getShort(p + propsPos);
        return propsLen >= 0 && propsPos + 2 + propsLen == total;
    }

    public static void main(String[] args) throws IOException {
        List<Path> segments;
        try (Stream<Path> s = Files.list(Paths.get(args[0]))) {
            segments = s.filter(f -> f.getFileName().toString().matches("\\d{20}")).sorted()
                        .collect(Collectors.toList());
        }
        int runs = args.length > 1 ? Integer.parseInt(args[1]) : 1;
        for (int run = 0; run < runs; run++) {
            CrcReference audit = new CrcReference();
            long t = System.nanoTime();
            for (Path segment : segments) {
                audit.segment(segment);
            }
            double ms = (System.nanoTime() - t) / 1e6;
            System.out.printf("{\"records\": %d, \"crc_failures\": %d, \"damaged\": %d, \"bytes\": %d, "
                              + "\"ms\": %.3f}%n", audit.records, audit.crcFailures, audit.damaged, audit.bytes, ms);
        }
    }
}
