package probe;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.functions.source.legacy.RichSourceFunction;
import org.apache.flink.util.Collector;

import java.io.Serializable;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A second probe job for the key types other than String and Long: one keyed operator per key
 * type, each with ValueState&lt;Long&gt; "count" and one event-time timer per key.
 *
 * <pre>
 * src (uid "src", operator ListState&lt;Long&gt; "offset", emits 0..K-1)
 *   keyBy(Integer i-100)                         → int-counter
 *   keyBy(Tuple2&lt;String,Long&gt; ("k"+i, i-100))  → tuple-counter
 *   keyBy(Double (i-100)/4.0)                    → double-counter
 *   keyBy(Short i-100)                           → short-counter
 *   keyBy(Character 'a'+i (é.. beyond ASCII))    → char-counter
 *   keyBy(PojoKey(i-100, "k"+i))                 → pojo-counter   (only with pojo=true)
 * </pre>
 *
 * The "pojo" variant holds only the POJO-keyed operator: rebucket must refuse it (its key
 * hash is user code), naming the operator, state and PojoSerializer.
 */
public final class TypesProbe {
    private TypesProbe() {}

    /** operator/key/what → value, as in Probe.Results. */
    public static final Map<String, String> results = new ConcurrentHashMap<>();
    public static final AtomicLong seen = new AtomicLong();
    public static final AtomicLong restoredOffset = new AtomicLong(-1);

    public static void reset() {
        results.clear();
        seen.set(0);
        restoredOffset.set(-1);
    }

    /** A POJO key: PojoSerializer, hashCode is user code. */
    public static final class PojoKey implements Serializable {
        public int id;
        public String name;

        public PojoKey() {}

        public PojoKey(int id, String name) {
            this.id = id;
            this.name = name;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof PojoKey p && p.id == id && Objects.equals(p.name, name);
        }

        @Override
        public int hashCode() {
            return 31 * id + name.hashCode();
        }

        @Override
        public String toString() {
            return id + "/" + name;
        }
    }

    static final String[] OPS = {"int-counter", "tuple-counter", "double-counter", "short-counter", "char-counter"};

    public static long timer(long i) {
        return 5000 + i;
    }

    public static TreeMap<String, String> expected(long k, boolean pojo) {
        TreeMap<String, String> m = new TreeMap<>();
        for (long i = 0; i < k; i++) {
            if (pojo) {
                put(m, "pojo-counter", new PojoKey((int) i - 100, "k" + i), i);
                continue;
            }
            put(m, "int-counter", (int) i - 100, i);
            put(m, "tuple-counter", Tuple2.of("k" + i, i - 100), i);
            put(m, "double-counter", (i - 100) / 4.0, i);
            put(m, "short-counter", (short) (i - 100), i);
            put(m, "char-counter", charKey(i), i);
        }
        return m;
    }

    private static void put(TreeMap<String, String> m, String op, Object key, long i) {
        m.put(op + "/" + key + "/count", "2");
        m.put(op + "/" + key + "/timer", timer(i) + ":2");
    }

    static char charKey(long i) {
        return (char) (0xe0 + i); // à, á, ... beyond ASCII: a 2-byte UTF-16 unit, 2-byte varint
    }

    public static JobGraph build(Configuration conf, boolean restore, long k, int par, int maxPar, String restorePath,
            boolean pojo) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(par);
        if (maxPar > 0) {
            env.setMaxParallelism(maxPar);
        }
        DataStream<Long> src = env.addSource(new Src(restore, k), "src", Types.LONG).setParallelism(1).uid("src").name("src");
        if (pojo) {
            add(src, "pojo-counter", i -> new PojoKey((int) (i - 100), "k" + i), TypeInformation.of(PojoKey.class), restore);
        } else {
            add(src, "int-counter", i -> (int) (i - 100), Types.INT, restore);
            add(src, "tuple-counter", i -> Tuple2.of("k" + i, i - 100), Types.TUPLE(Types.STRING, Types.LONG), restore);
            add(src, "double-counter", i -> (i - 100) / 4.0, Types.DOUBLE, restore);
            add(src, "short-counter", i -> (short) (i - 100), Types.SHORT, restore);
            add(src, "char-counter", TypesProbe::charKey, Types.CHAR, restore);
        }
        JobGraph jg = env.getStreamGraph().getJobGraph();
        if (restorePath != null) {
            jg.setSavepointRestoreSettings(SavepointRestoreSettings.forPath(restorePath, false));
        }
        return jg;
    }

    private static <K> void add(DataStream<Long> src, String uid, KeySelector<Long, K> ks, TypeInformation<K> kt,
            boolean restore) {
        src.keyBy(ks, kt)
                .process(new Counter<K>(uid, restore))
                .returns(Types.STRING)
                .uid(uid)
                .name(uid)
                .sinkTo(new DiscardingSink<>())
                .uid("sink-" + uid)
                .name("sink-" + uid);
    }

    static final class Counter<K> extends KeyedProcessFunction<K, Long, String> {
        private final String op;
        private final boolean restore;
        private transient ValueState<Long> count;

        Counter(String op, boolean restore) {
            this.op = op;
            this.restore = restore;
        }

        @Override
        public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(Long i, Context ctx, Collector<String> out) throws Exception {
            Long prev = count.value();
            long next = prev == null ? 1 : prev + 1;
            count.update(next);
            if (!restore) {
                ctx.timerService().registerEventTimeTimer(timer(i));
            } else {
                results.merge(op + "/" + ctx.getCurrentKey() + "/count", Long.toString(next), (a, b) -> a + "," + b);
            }
            seen.incrementAndGet();
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<String> out) throws Exception {
            results.merge(op + "/" + ctx.getCurrentKey() + "/timer", ts + ":" + count.value(), (a, b) -> a + "," + b);
        }
    }

    static final class Src extends RichSourceFunction<Long> implements CheckpointedFunction {
        private final boolean restore;
        private final long k;
        private transient ListState<Long> offsetState;
        private long offset;
        private volatile boolean running = true;

        Src(boolean restore, long k) {
            this.restore = restore;
            this.k = k;
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            offsetState = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("offset", Types.LONG));
            for (Long o : offsetState.get()) {
                offset = o;
            }
            if (ctx.isRestored()) {
                restoredOffset.set(offset);
            }
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            offsetState.update(List.of(offset));
        }

        @Override
        public void run(SourceContext<Long> ctx) throws Exception {
            if (!restore) {
                while (running && offset < k) {
                    synchronized (ctx.getCheckpointLock()) {
                        ctx.collect(offset++);
                    }
                }
                while (running) {
                    Thread.sleep(20);
                }
                return;
            }
            for (long i = 0; running && i < offset; i++) {
                synchronized (ctx.getCheckpointLock()) {
                    ctx.collect(i);
                }
            }
        }

        @Override
        public void cancel() {
            running = false;
        }
    }
}
