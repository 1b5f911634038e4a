package probe;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.table.api.Table;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import static org.apache.flink.table.api.Expressions.$;

/**
 * A Table/SQL job whose keyed state is keyed by BinaryRowData (RowDataSerializer keys): three
 * GROUP BY aggregates over the probe source (0..K-1),
 *
 * <pre>
 *   SELECT CONCAT('k', CAST(i AS STRING)) k, COUNT(*) c ... GROUP BY k       -- key Row&lt;STRING&gt;
 *   SELECT i - 100 k, SUM(i+1) s ... GROUP BY i - 100                         -- key Row&lt;BIGINT&gt;
 *   SELECT CAST(i % 7 AS INT) a, CONCAT('k', ...) b, COUNT(*) ... GROUP BY a, b  -- Row&lt;INT,STRING&gt;
 * </pre>
 *
 * Restore (the oracle): every key once more; each group must be updated (-U/+U) to count 2
 * (sum 2i), not inserted anew with 1. The savepoint shows the key serializer SQL really uses and real BinaryRowData key bytes, so
 * rebucket's row hashing can be checked on every entry (its prefix must be the key's group).
 */
public final class SqlProbe {
    private SqlProbe() {}

    public static final AtomicLong emitted = new AtomicLong();
    /** "sql-N/key" → "+I 1" / "+U 2" for every insert or update-after row (duplicates joined). */
    public static final Map<String, String> results = new ConcurrentHashMap<>();

    /** After a correct restore and one more record per key, every group was updated to 2 / 2i. */
    public static TreeMap<String, String> expected(long k) {
        TreeMap<String, String> m = new TreeMap<>();
        for (long i = 0; i < k; i++) {
            m.put("sql-0/k" + i, "+U 2");
            m.put("sql-1/" + (i - 100), "+U " + (2 * (i + 1)));
            m.put("sql-2/" + (i % 7) + "|k" + i, "+U 2");
        }
        return m;
    }

    public static JobGraph build(Configuration conf, boolean restore, long k, int par, int maxPar, String path) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(par);
        if (maxPar > 0) {
            env.setMaxParallelism(maxPar);
        }
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env);
        DataStream<Long> src =
                env.addSource(new TypesProbe.Src(restore, k), "src", Types.LONG).setParallelism(1).uid("src").name("src");
        tEnv.createTemporaryView("src", src, $("i"));
        String[] queries = {
            "SELECT CONCAT('k', CAST(i AS STRING)) AS k, COUNT(*) AS c FROM src GROUP BY CONCAT('k', CAST(i AS STRING))",
            "SELECT i - 100 AS k, SUM(i + 1) AS s FROM src GROUP BY i - 100",
            "SELECT CAST(i % 7 AS INT) AS a, CONCAT('k', CAST(i AS STRING)) AS b, COUNT(*) AS c FROM src"
                    + " GROUP BY CAST(i % 7 AS INT), CONCAT('k', CAST(i AS STRING))",
        };
        int n = 0;
        for (String q : queries) {
            Table t = tEnv.sqlQuery(q);
            String name = "sql-" + n++;
            DataStream<Row> rows = tEnv.toChangelogStream(t);
            final boolean record = restore;
            final String qn = name;
            rows.map(r -> {
                        emitted.incrementAndGet();
                        if (record && (r.getKind() == RowKind.INSERT || r.getKind() == RowKind.UPDATE_AFTER)) {
                            StringBuilder key = new StringBuilder();
                            for (int f = 0; f < r.getArity() - 1; f++) {
                                key.append(f == 0 ? "" : "|").append(r.getField(f));
                            }
                            results.merge(qn + "/" + key, r.getKind().shortString() + " " + r.getField(r.getArity() - 1),
                                    (a, b) -> a + "," + b);
                        }
                        return r;
                    })
                    .returns(rows.getType())
                    .uid("count-" + name)
                    .name("count-" + name)
                    .sinkTo(new DiscardingSink<>())
                    .uid("sink-" + name)
                    .name("sink-" + name);
        }
        JobGraph jg = env.getStreamGraph().getJobGraph();
        if (path != null) {
            jg.setSavepointRestoreSettings(SavepointRestoreSettings.forPath(path, false));
        }
        return jg;
    }
}
