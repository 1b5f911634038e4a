package probe;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.jobgraph.JobGraph;

import java.util.TreeMap;

/** The probe jobs Make and Restore know, behind one face. */
enum Jobs {
    /** String/Long keys, Value/Map/List state, timers (Probe). */
    PROBE,
    /** Integer, Tuple2, Double, Short, Character keys (TypesProbe). */
    TYPES,
    /** A POJO key only (TypesProbe with pojo=true): the negative case. */
    POJO,
    /** Table/SQL GROUP BY aggregates, keyed by BinaryRowData (SqlProbe). */
    SQL;

    static Jobs of(String name) {
        return valueOf(name.toUpperCase());
    }

    JobGraph build(Configuration conf, boolean restore, long k, int p, int m, String path) {
        return switch (this) {
            case PROBE -> Probe.build(conf, restore, k, p, m, path);
            case SQL -> SqlProbe.build(conf, restore, k, p, m, path);
            default -> TypesProbe.build(conf, restore, k, p, m, path, this == POJO);
        };
    }

    void reset() {
        Probe.Results.reset();
        TypesProbe.reset();
        SqlProbe.emitted.set(0);
        SqlProbe.results.clear();
    }

    /** True once every keyed operator has processed all k records of the first run. */
    boolean processed(long k) {
        return switch (this) {
            case PROBE -> Probe.Results.strSeen.get() >= k && Probe.Results.longSeen.get() >= k;
            case TYPES -> TypesProbe.seen.get() >= 5 * k;
            case POJO -> TypesProbe.seen.get() >= k;
            case SQL -> SqlProbe.emitted.get() >= 3 * k;
        };
    }

    long restoredOffset() {
        return this == PROBE ? Probe.Results.restoredOffset.get() : TypesProbe.restoredOffset.get();
    }

    TreeMap<String, String> results() {
        return switch (this) {
            case PROBE -> Probe.Results.snapshot();
            case SQL -> new TreeMap<>(SqlProbe.results);
            default -> new TreeMap<>(TypesProbe.results);
        };
    }

    TreeMap<String, String> expected(long k) {
        if (this == SQL) {
            return SqlProbe.expected(k);
        }
        return this == PROBE ? Probe.expected(k) : TypesProbe.expected(k, this == POJO);
    }
}
