package probe;

import org.apache.flink.api.common.JobID;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.util.ExceptionUtils;

import java.io.DataInputStream;
import java.io.FileInputStream;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The restore oracle: Flink itself restores a savepoint into the {@link Probe} job, every key is
 * fed once more, and every key's state and timers must have continued (see Probe).
 *
 * <p>Usage, one case: {@code probe.Restore --savepoint DIR --parallelism P [--max-parallelism M]
 * [--backend hashmap|rocksdb] [--reference DIR] [--keys K]}
 *
 * <p>Many cases in one JVM (one MiniCluster): {@code probe.Restore CASE...} with CASE =
 * {@code savepoint=DIR,p=40,m=128,backend=rocksdb,ref=DIR,keys=200,name=x,job=probe|types|pojo|sql};
 * m=unset leaves the
 * job's max parallelism unset (the job adopts the savepoint's).
 *
 * <p>The reference is the original savepoint restored without rebucketing (at parallelism 2
 * and its own max parallelism 8, same backend); the case's per-key results must equal it and
 * must equal the expected values. expect=fail makes a negative control: it passes only if Flink
 * refuses the restore or the state comes out wrong. Prints one line per case ending in {@code RESULT OK} or
 * {@code RESULT MISMATCH ...}/{@code RESULT FAIL ...}; exits 1 if any case is not OK, 2 on
 * usage errors.
 */
public final class Restore {
    private Restore() {}

    record Case(String name, String savepoint, int p, int m, String backend, String ref, long keys, boolean expectFail, Jobs job) {}

    public static void main(String[] args) throws Exception {
        List<Case> cases;
        try {
            cases = parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("probe.Restore: " + e.getMessage());
            System.err.println(
                    "usage: probe.Restore --savepoint DIR --parallelism P [--max-parallelism M] "
                            + "[--backend hashmap|rocksdb] [--reference DIR] [--keys K]\n"
                            + "   or: probe.Restore savepoint=DIR,p=P,m=M|unset,backend=B[,ref=DIR][,keys=K][,name=N] ...");
            System.exit(2);
            return;
        }
        int bad = 0;
        Map<String, TreeMap<String, String>> refs = new HashMap<>();
        try (Cluster c = new Cluster()) {
            for (Case cs : cases) {
                if (!run(c, cs, refs)) {
                    bad++;
                }
            }
        }
        System.out.printf("restore cases: %d ok, %d not ok%n", cases.size() - bad, bad);
        System.out.flush();
        // MiniCluster leaves non-daemon threads behind; the verdict is in the exit code.
        System.exit(bad == 0 ? 0 : 1);
    }

    static List<Case> parse(String[] args) {
        List<Case> out = new ArrayList<>();
        if (args.length == 0) {
            throw new IllegalArgumentException("no case given");
        }
        if (args[0].startsWith("--")) {
            Map<String, String> kv = new LinkedHashMap<>();
            for (int i = 0; i < args.length; i += 2) {
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException("flag " + args[i] + " needs a value");
                }
                String key =
                        switch (args[i]) {
                            case "--savepoint" -> "savepoint";
                            case "--parallelism" -> "p";
                            case "--max-parallelism" -> "m";
                            case "--backend" -> "backend";
                            case "--reference" -> "ref";
                            case "--keys" -> "keys";
                            default -> throw new IllegalArgumentException("unknown flag " + args[i]);
                        };
                kv.put(key, args[i + 1]);
            }
            out.add(toCase(kv));
            return out;
        }
        for (String a : args) {
            Map<String, String> kv = new LinkedHashMap<>();
            for (String part : a.split(",")) {
                int eq = part.indexOf('=');
                if (eq < 0) {
                    throw new IllegalArgumentException("case part " + part + " is not key=value");
                }
                kv.put(part.substring(0, eq), part.substring(eq + 1));
            }
            out.add(toCase(kv));
        }
        return out;
    }

    static Case toCase(Map<String, String> kv) {
        String sp = kv.get("savepoint");
        if (sp == null) {
            throw new IllegalArgumentException("a case needs a savepoint");
        }
        if (sp.endsWith("/_metadata")) {
            sp = sp.substring(0, sp.length() - "/_metadata".length());
        }
        if (!Files.isRegularFile(Paths.get(sp, "_metadata"))) {
            throw new IllegalArgumentException(sp + " holds no _metadata");
        }
        String p = kv.getOrDefault("p", "2");
        String m = kv.getOrDefault("m", "unset");
        String backend = kv.getOrDefault("backend", "hashmap");
        if (!backend.equals("hashmap") && !backend.equals("rocksdb")) {
            throw new IllegalArgumentException("backend must be hashmap or rocksdb, not " + backend);
        }
        String name = kv.getOrDefault("name", sp + " p=" + p + " m=" + m + " " + backend);
        return new Case(
                name,
                Paths.get(sp).toAbsolutePath().toString(),
                Integer.parseInt(p),
                m.equals("unset") ? -1 : Integer.parseInt(m),
                backend,
                kv.containsKey("ref") ? Paths.get(kv.get("ref")).toAbsolutePath().toString() : null,
                Long.parseLong(kv.getOrDefault("keys", "-1")),
                switch (kv.getOrDefault("expect", "ok")) {
                    case "ok" -> false;
                    case "fail" -> true;
                    default -> throw new IllegalArgumentException("expect must be ok or fail");
                },
                Jobs.of(kv.getOrDefault("job", "probe")));
    }

    record Outcome(TreeMap<String, String> state, long restoredOffset, long strSeen, long longSeen, String error, double seconds) {}

    static Outcome restore(Cluster c, Jobs job, String savepoint, int p, int m, String backend) {
        job.reset();
        long t0 = System.nanoTime();
        try {
            Configuration conf = new Configuration();
            conf.set(StateBackendOptions.STATE_BACKEND, backend);
            // K is only known from the restored source offset; the job does not need it.
            JobID id = c.submit(job.build(conf, true, 0, p, m, savepoint));
            c.await(id);
        } catch (Throwable t) {
            Throwable root = ExceptionUtils.stripExecutionException(t);
            StringBuilder msg = new StringBuilder();
            for (Throwable x = root; x != null; x = x.getCause()) {
                if (msg.length() > 0) {
                    msg.append(" <- ");
                }
                msg.append(x.getClass().getSimpleName()).append(": ").append(x.getMessage());
                if (x.getCause() == x) {
                    break;
                }
            }
            return new Outcome(null, -1, 0, 0, msg.toString(), (System.nanoTime() - t0) / 1e9);
        }
        return new Outcome(
                job.results(),
                job.restoredOffset(),
                Probe.Results.strSeen.get(),
                Probe.Results.longSeen.get(),
                null,
                (System.nanoTime() - t0) / 1e9);
    }

    static boolean run(Cluster c, Case cs, Map<String, TreeMap<String, String>> refs) throws Exception {
        TreeMap<String, String> ref = null;
        if (cs.ref != null) {
            String refKey = cs.ref + "|" + cs.backend + "|" + cs.job;
            ref = refs.get(refKey);
            if (ref == null) {
                // Explicit max parallelism: a job that leaves it unset does not always adopt
                // the savepoint's (it fails or loses state on a State Processor API savepoint).
                Outcome ro = restore(c, cs.job, cs.ref, 2, maxParallelism(cs.ref), cs.backend);
                if (ro.error != null) {
                    System.out.printf("CASE %s: reference %s failed to restore: RESULT FAIL %s%n", cs.name, cs.ref, ro.error);
                    return false;
                }
                List<String> d = diff(cs.job.expected(ro.restoredOffset), ro.state);
                if (!d.isEmpty()) {
                    System.out.printf("CASE %s: reference run itself is off: RESULT MISMATCH %s%n", cs.name, d);
                    return false;
                }
                ref = ro.state;
                refs.put(refKey, ref);
                System.out.printf("reference %s (%s, p=2, its own max parallelism): %d results, %.1fs%n",
                        cs.ref, cs.backend, ref.size(), ro.seconds);
            }
        }
        Outcome o = restore(c, cs.job, cs.savepoint, cs.p, cs.m, cs.backend);
        String head = String.format("CASE %s (%.1fs): ", cs.name, o.seconds);
        if (cs.expectFail) {
            // A negative control: Flink must refuse this restore or lose state (the oracle can fail).
            if (o.error != null) {
                System.out.println(head + "RESULT OK (refused as expected): " + o.error);
                return true;
            }
            List<String> d = diff(cs.job.expected(Math.max(o.restoredOffset, 0)), o.state);
            if (!d.isEmpty()) {
                System.out.println(head + "RESULT OK (state lost as expected): " + d.get(d.size() - 1));
                return true;
            }
            System.out.println(head + "RESULT UNEXPECTED: restored correctly, but this case must fail");
            return false;
        }
        if (o.error != null) {
            System.out.println(head + "RESULT FAIL " + o.error);
            return false;
        }
        long k = o.restoredOffset;
        List<String> problems = new ArrayList<>();
        if (k < 0) {
            problems.add("source restored no offset");
        }
        if (cs.keys >= 0 && k != cs.keys) {
            problems.add("source offset " + k + ", want " + cs.keys);
        }
        problems.addAll(diff(cs.job.expected(Math.max(k, 0)), o.state));
        if (ref != null && !ref.equals(o.state)) {
            problems.add("differs from the reference run: " + diff(ref, o.state));
        }
        if (problems.isEmpty()) {
            System.out.printf("%s%d results%s RESULT OK: all %d keys continued 1 -> 2%s%n",
                    head, o.state.size(),
                    cs.job == Jobs.PROBE ? String.format(" (updates str=%d long=%d)", o.strSeen, o.longSeen) : "", k,
                    cs.job == Jobs.SQL ? "" : ", every timer fired once");
            return true;
        }
        System.out.println(head + "RESULT MISMATCH " + problems);
        return false;
    }

    static int maxParallelism(String savepoint) throws Exception {
        try (DataInputStream in = new DataInputStream(new FileInputStream(Paths.get(savepoint, "_metadata").toFile()))) {
            CheckpointMetadata md = Checkpoints.loadCheckpointMetadata(in, Restore.class.getClassLoader(), savepoint);
            return md.getOperatorStates().stream().mapToInt(OperatorState::getMaxParallelism).max().orElseThrow();
        }
    }

    /** Differences of got against want, at most 10 shown, with the total. */
    static List<String> diff(TreeMap<String, String> want, TreeMap<String, String> got) {
        TreeSet<String> keys = new TreeSet<>(want.keySet());
        keys.addAll(got.keySet());
        List<String> out = new ArrayList<>();
        int n = 0;
        for (String key : keys) {
            String w = want.get(key);
            String g = got.get(key);
            if (w == null ? g != null : !w.equals(g)) {
                n++;
                if (out.size() < 10) {
                    out.add(key + ": want " + w + " got " + g);
                }
            }
        }
        if (n > 0) {
            out.add(n + " of " + keys.size() + " results differ");
        }
        return out;
    }
}
