package io.rocketstore.golden;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.rocketmq.store.CommitLog;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * The multi-path CommitLog golden stores (RocketMQ 4.9.2+): {@code storePathCommitLog} lists two directories,
 * so RocketMQ's own MultiPathMappedFileQueue spreads the segments over them (segment k into the k-th of the
 * sorted directory names, modulo their count). A scenario folder holds the store root {@code store/} and the
 * two CommitLog directories {@link #DIRS}, relative to the folder; every path this class reports is relative
 * to the scenario folder. Runs as its own JVM, once per command:
 *
 * <pre>
 *   write   --scenario DIR --mode clean|crash --messages N   the Generator's message mix, N sends, in its
 *                                                            three phases; shut down (clean) or halt (crash)
 *   inspect --scenario DIR --out FILE     every record of every segment (both directories, in name order)
 *                                         as RocketMQ decodes it; the checkpoint; every file
 *   recover --scenario DIR --work DIR --out FILE   RocketMQ's real recovery of a copy (as Generator recover)
 * </pre>
 */
public final class MultiPath {
    /** storePathCommitLog, in the order broker.conf lists them (RocketMQ sorts them: disk2/ takes segment 0). */
    static final String[] DIRS = {"store/commitlog", "disk2/commitlog"};

    private MultiPath() {
    }

    public static void main(String[] argv) throws Exception {
        Generator.Args args = new Generator.Args(argv);
        Generator.log("RocketMQ " + Rmq.version() + " multi-path: " + String.join(" ", argv));
        int status = 0;
        try {
            switch (args.command) {
                case "write": write(args); break;
                case "inspect": inspect(args); break;
                case "recover": recover(args); break;
                default: throw new IllegalArgumentException("unknown command " + args.command);
            }
        } catch (Exception | Error e) {
            e.printStackTrace();
            status = 1;
        }
        System.exit(status);
    }

    static String storePathCommitLog(Path scenario) {
        List<String> paths = new ArrayList<>();
        for (String d : DIRS) {
            paths.add(scenario.resolve(d).toAbsolutePath().toString());
        }
        return String.join(",", paths);
    }

    /** The golden geometry on the scenario's root, with the CommitLog over both directories. */
    static MessageStoreConfig config(Path scenario) {
        MessageStoreConfig cfg = Generator.config(scenario.resolve("store").toAbsolutePath().toString());
        cfg.setStorePathCommitLog(storePathCommitLog(scenario));
        return cfg;
    }

    static void write(Generator.Args args) throws Exception {
        Path scenario = Paths.get(args.get("scenario"));
        int total = Integer.parseInt(args.get("messages"));
        MessageStoreConfig cfg = config(scenario);
        DefaultMessageStore store = Generator.open(cfg);
        store.start();
        Generator.Writer w = Generator.writePhases(store, cfg, total, total * 6 / 10, total * 8 / 10);
        Generator.log("wrote " + w.records + " records over " + cfg.getStorePathCommitLog() + ", max offset "
            + store.getMaxPhyOffset());
        if (args.get("mode").equals("crash")) {
            Generator.log("halting without shutdown");
            Runtime.getRuntime().halt(0);
        }
        store.shutdown();
    }

    static void inspect(Generator.Args args) throws Exception {
        Path scenario = Paths.get(args.get("scenario"));
        Path scratch = Files.createTempDirectory("golden-inspect");
        MessageStoreConfig cfg = Generator.config(scratch.toString());
        DefaultMessageStore scratchStore = Generator.open(cfg);
        CommitLog log = scratchStore.getCommitLog();
        List<File> files = new ArrayList<>();
        for (String d : DIRS) {
            File[] ls = scenario.resolve(d).toFile().listFiles();
            if (ls != null) {
                files.addAll(List.of(ls));
            }
        }
        files.sort((x, y) -> x.getName().equals(y.getName()) ? x.getPath().compareTo(y.getPath())
            : x.getName().compareTo(y.getName()));   // MappedFileQueue.doLoad: by name
        List<Object> messages = new ArrayList<>();
        List<Object> segments = new ArrayList<>();
        for (File f : files) {
            Map<String, Object> seg = Generator.walkSegment(log, cfg, f, messages);
            seg.put("directory", scenario.relativize(f.getParentFile().toPath()).toString());
            segments.add(seg);
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        out.put("store_path_commitlog", List.of(DIRS));
        out.put("segments", segments);
        out.put("checkpoint", Generator.checkpoint(scenario.resolve("store"), scratch));
        out.put("abort_present", Files.exists(scenario.resolve("store").resolve("abort")));
        out.put("files", Generator.listFiles(scenario));
        out.put("messages", messages);
        Files.write(Paths.get(args.get("out")), Json.write(out).getBytes(StandardCharsets.UTF_8));
        Generator.log("inspected " + messages.size() + " records in " + segments.size() + " segments");
    }

    /** Generator.recover on a copy of the whole scenario folder (the root and both CommitLog directories). */
    static void recover(Generator.Args args) throws Exception {
        Path scenario = Paths.get(args.get("scenario"));
        Path work = Paths.get(args.get("work"));
        Generator.deleteTree(work);
        Generator.copyTree(scenario, work);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rocketmq_version", Rmq.version());
        out.put("abort_present", Files.exists(work.resolve("store").resolve("abort")));
        Map<String, String> before = Generator.fileDigests(work);
        DefaultMessageStore store = Rmq.newStore(config(work));
        boolean loaded = Generator.load(store, out);
        if (loaded) {
            store.start();
            Generator.waitDispatched(store);
            out.put("commitlog_min_offset", store.getMinPhyOffset());
            out.put("commitlog_max_offset", store.getMaxPhyOffset());
            out.put("confirm_offset", Rmq.getter(store.getCommitLog(), "getConfirmOffset"));
            out.put("queues", Generator.queues(store));
            store.shutdown();
        }
        Generator.putFileChanges(out, before, Generator.fileDigests(work));
        out.put("abort_after_shutdown", Files.exists(work.resolve("store").resolve("abort")));
        out.put("files_after", Generator.listFiles(work));
        Files.write(Paths.get(args.get("out")), Json.write(out).getBytes(StandardCharsets.UTF_8));
        Generator.deleteTree(work);
        Generator.log("recovered: loaded=" + loaded + " max=" + out.get("commitlog_max_offset") + " deleted="
            + out.get("files_deleted"));
    }
}
