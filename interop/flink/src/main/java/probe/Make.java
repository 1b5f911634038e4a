package probe;

import org.apache.flink.api.common.JobID;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExecutionOptions;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.core.execution.SavepointFormatType;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * Makes real savepoints of the {@link Probe} job (max parallelism 8, parallelism 2) after all K
 * keys were processed once.
 *
 * <p>Usage: {@code probe.Make OUTDIR K [NAME...]}. Names (all when none given):
 *
 * <ul>
 *   <li>heap-files, rocksdb-files: CANONICAL, filesystem checkpoint storage with a 1 KiB inline
 *       threshold, so keyed state is in files beside _metadata (relative file handles);
 *   <li>heap-inline, rocksdb-inline: CANONICAL, jobmanager storage: every handle inline in
 *       _metadata;
 *   <li>heap-files-snappy: heap-files with execution.checkpointing.snapshot-compression;
 *   <li>heap-native, rocksdb-native: NATIVE savepoints of the *-files jobs (negative tests);
 *   <li>types-heap, types-rocksdb: the {@link TypesProbe} job (Integer, Tuple2, Double, Short,
 *       Character keys), files;
 *   <li>pojo-heap: TypesProbe with only a POJO-keyed operator (must be refused by rebucket);
 *   <li>sql-heap, sql-rocksdb: {@link SqlProbe}, GROUP BY aggregates keyed by BinaryRowData.
 * </ul>
 *
 * Each lands in OUTDIR/NAME. Options: -Dprobe.maxParallelism (8), -Dprobe.parallelism (2).
 */
public final class Make {
    private Make() {}

    record Variant(String name, String backend, boolean files, boolean snappy, String nativeName, Jobs job) {}

    static final List<Variant> VARIANTS =
            List.of(
                    new Variant("heap-files", "hashmap", true, false, "heap-native", Jobs.PROBE),
                    new Variant("heap-inline", "hashmap", false, false, null, Jobs.PROBE),
                    new Variant("rocksdb-files", "rocksdb", true, false, "rocksdb-native", Jobs.PROBE),
                    new Variant("rocksdb-inline", "rocksdb", false, false, null, Jobs.PROBE),
                    new Variant("heap-files-snappy", "hashmap", true, true, null, Jobs.PROBE),
                    new Variant("types-heap", "hashmap", true, false, null, Jobs.TYPES),
                    new Variant("types-rocksdb", "rocksdb", true, false, null, Jobs.TYPES),
                    new Variant("pojo-heap", "hashmap", true, false, null, Jobs.POJO),
                    new Variant("sql-heap", "hashmap", true, false, null, Jobs.SQL),
                    new Variant("sql-rocksdb", "rocksdb", true, false, null, Jobs.SQL));

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: probe.Make OUTDIR K [NAME...]");
            System.exit(2);
        }
        Path out = Paths.get(args[0]).toAbsolutePath();
        long k = Long.parseLong(args[1]);
        List<String> only = Arrays.asList(args).subList(2, args.length);
        int maxPar = Integer.getInteger("probe.maxParallelism", 8);
        int par = Integer.getInteger("probe.parallelism", 2);
        Files.createDirectories(out);
        Path work = Files.createTempDirectory(out, ".work");
        try (Cluster c = new Cluster()) {
            for (Variant v : VARIANTS) {
                boolean wantNative = v.nativeName != null && (only.isEmpty() || only.contains(v.nativeName));
                if (!only.isEmpty() && !only.contains(v.name) && !wantNative) {
                    continue;
                }
                make(c, v, wantNative, work, out, k, par, maxPar);
            }
        } finally {
            deleteTree(work);
        }
    }

    static Configuration jobConf(String backend, boolean files, boolean snappy, Path work) {
        Configuration conf = new Configuration();
        conf.set(StateBackendOptions.STATE_BACKEND, backend);
        if (files) {
            conf.set(CheckpointingOptions.CHECKPOINT_STORAGE, "filesystem");
            conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, work.resolve("chk").toUri().toString());
            conf.set(CheckpointingOptions.FS_SMALL_FILE_THRESHOLD, MemorySize.parse("1kb"));
        } else {
            conf.set(CheckpointingOptions.CHECKPOINT_STORAGE, "jobmanager");
        }
        conf.set(ExecutionOptions.SNAPSHOT_COMPRESSION, snappy);
        return conf;
    }

    static void make(Cluster c, Variant v, boolean wantNative, Path work, Path out, long k, int par, int maxPar)
            throws Exception {
        v.job.reset();
        long t0 = System.nanoTime();
        JobID id = c.submit(v.job.build(jobConf(v.backend, v.files, v.snappy, work), false, k, par, maxPar, null));
        c.waitFor(
                id,
                () -> v.job.processed(k),
                600_000,
                "all " + k + " keys processed");
        long t1 = System.nanoTime();
        place(c.savepoint(id, work.toUri().toString(), SavepointFormatType.CANONICAL), out.resolve(v.name));
        long t2 = System.nanoTime();
        System.out.printf(
                "made %s: backend=%s storage=%s compression=%s keys=%d processed %.2fs canonical savepoint %.2fs%n",
                v.name, v.backend, v.files ? "filesystem" : "jobmanager", v.snappy, k, (t1 - t0) / 1e9, (t2 - t1) / 1e9);
        if (wantNative) {
            place(c.savepoint(id, work.toUri().toString(), SavepointFormatType.NATIVE), out.resolve(v.nativeName));
            System.out.printf("made %s: NATIVE savepoint of the same job %.2fs%n", v.nativeName, (System.nanoTime() - t2) / 1e9);
        }
        c.cancel(id);
    }

    /** Moves Flink's savepoint-xxxx directory to dst (savepoints are relocatable). */
    static void place(String location, Path dst) throws IOException {
        Path src = location.startsWith("file:") ? Paths.get(URI.create(location)) : Paths.get(location);
        deleteTree(dst);
        Files.move(src, dst);
    }

    static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) {
            return;
        }
        try (Stream<Path> s = Files.walk(p)) {
            List<Path> all = new ArrayList<>(s.sorted(Comparator.reverseOrder()).toList());
            for (Path q : all) {
                Files.delete(q);
            }
        }
    }
}
