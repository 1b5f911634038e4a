package probe;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
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

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The probe job of issue 11.
 *
 * <pre>
 * src (parallelism 1, operator ListState&lt;Long&gt; "offset", emits 0..K-1)
 *  ├─ map "k"+i (to-str) → keyBy(String) → str-counter: ValueState&lt;Long&gt; "count",
 *  │                                          event-time timer at -1000-i   → sink-str
 *  └─ keyBy(Long i-100) → long-agg: MapState&lt;String,Long&gt; "tags" ("t"+i%3 → n),
 *                                     ListState&lt;Long&gt; "events" (i), timer at 1000000+key → sink-long
 * </pre>
 *
 * <p>Phase CREATE emits every i once, registers one timer per key and then idles, so a
 * savepoint taken after all K records holds count 1, tag 1, one event and one pending timer
 * per key. Phase RESTORE starts from a savepoint: the source must restore offset K, emits
 * every i once more without registering timers, and finishes; the final watermark then fires
 * the restored timers. Every key must end with count 2, tag 2, two events and exactly one
 * fired timer that saw count 2: anything else means state or timers were lost or duplicated.
 * The functions record what they saw in {@link Results} (the MiniCluster runs in this JVM).
 */
public final class Probe {
    private Probe() {}

    /** long-agg's key is i-100: negative keys exercise Long.hashCode's sign handling. */
    public static final long LONG_KEY_SHIFT = 100;

    public static long strTimer(long i) {
        return -1000 - i; // negative: exercises the sign flip of the timer key
    }

    public static long longTimer(long key) {
        return 1_000_000 + key;
    }

    /** What the operators observed; filled by the tasks, read by the driver after the job. */
    public static final class Results {
        public static final AtomicLong srcEmitted = new AtomicLong();
        public static final AtomicLong restoredOffset = new AtomicLong(-1);
        public static final AtomicLong strSeen = new AtomicLong();
        public static final AtomicLong longSeen = new AtomicLong();
        /** "str/k5/count" → "2", "long/-3/events" → "[97, 97]", ".../timer" → "ts:state", ... */
        public static final Map<String, String> state = new ConcurrentHashMap<>();

        public static void reset() {
            srcEmitted.set(0);
            restoredOffset.set(-1);
            strSeen.set(0);
            longSeen.set(0);
            state.clear();
        }

        static void put(String k, String v) {
            state.merge(k, v, (a, b) -> a + "," + b); // a duplicate shows as "x,y"
        }

        public static TreeMap<String, String> snapshot() {
            return new TreeMap<>(state);
        }
    }

    /** What every key must hold after a correct restore of a K-key savepoint. */
    public static TreeMap<String, String> expected(long k) {
        TreeMap<String, String> m = new TreeMap<>();
        for (long i = 0; i < k; i++) {
            m.put("str/k" + i + "/count", "2");
            m.put("str/k" + i + "/timer", strTimer(i) + ":2");
            long key = i - LONG_KEY_SHIFT;
            m.put("long/" + key + "/tags", "{t" + (i % 3) + "=2}");
            m.put("long/" + key + "/events", "[" + i + ", " + i + "]");
            m.put("long/" + key + "/timer", longTimer(key) + ":{t" + (i % 3) + "=2}/2");
        }
        return m;
    }

    /**
     * Builds the job graph.
     *
     * @param jobConf backend, checkpoint storage and compression for this job
     * @param maxParallelism the job's max parallelism, or -1 to leave it unset
     */
    public static JobGraph build(
            Configuration jobConf,
            boolean restore,
            long k,
            int parallelism,
            int maxParallelism,
            String restorePath) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(jobConf);
        env.setParallelism(parallelism);
        if (maxParallelism > 0) {
            env.setMaxParallelism(maxParallelism);
        }
        DataStream<Long> src =
                env.addSource(new Src(restore, k), "src", Types.LONG)
                        .setParallelism(1)
                        .uid("src")
                        .name("src");
        src.map(i -> "k" + i)
                .returns(Types.STRING)
                .uid("to-str")
                .name("to-str")
                .keyBy(s -> s, Types.STRING)
                .process(new StrCounter(restore))
                .returns(Types.STRING)
                .uid("str-counter")
                .name("str-counter")
                .sinkTo(new DiscardingSink<>())
                .uid("sink-str")
                .name("sink-str");
        src.keyBy(i -> i - LONG_KEY_SHIFT, Types.LONG)
                .process(new LongAgg(restore))
                .returns(Types.STRING)
                .uid("long-agg")
                .name("long-agg")
                .sinkTo(new DiscardingSink<>())
                .uid("sink-long")
                .name("sink-long");
        JobGraph jg = env.getStreamGraph().getJobGraph();
        if (restorePath != null) {
            jg.setSavepointRestoreSettings(SavepointRestoreSettings.forPath(restorePath, false));
        }
        return jg;
    }

    /** Non-parallel legacy source with operator state "offset" (how far it has emitted). */
    public static final class Src extends RichSourceFunction<Long> implements CheckpointedFunction {
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
            offsetState =
                    ctx.getOperatorStateStore()
                            .getListState(new ListStateDescriptor<>("offset", Types.LONG));
            for (Long o : offsetState.get()) {
                offset = o;
            }
            if (ctx.isRestored()) {
                Results.restoredOffset.set(offset);
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
                        ctx.collect(offset);
                        offset++;
                        Results.srcEmitted.incrementAndGet();
                    }
                }
                while (running) {
                    Thread.sleep(20); // idle until the driver has its savepoints
                }
                return;
            }
            // Restore: every key once more, then finish (the final watermark fires the timers).
            for (long i = 0; running && i < offset; i++) {
                synchronized (ctx.getCheckpointLock()) {
                    ctx.collect(i);
                    Results.srcEmitted.incrementAndGet();
                }
            }
        }

        @Override
        public void cancel() {
            running = false;
        }
    }

    /** String-keyed ValueState "count" and one event-time timer per key. */
    public static final class StrCounter extends KeyedProcessFunction<String, String, String> {
        private final boolean restore;
        private transient ValueState<Long> count;

        StrCounter(boolean restore) {
            this.restore = restore;
        }

        @Override
        public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(String s, Context ctx, Collector<String> out) throws Exception {
            Long prev = count.value();
            long next = prev == null ? 1 : prev + 1;
            count.update(next);
            if (!restore) {
                ctx.timerService().registerEventTimeTimer(strTimer(Long.parseLong(s.substring(1))));
            } else {
                Results.put("str/" + s + "/count", Long.toString(next));
            }
            Results.strSeen.incrementAndGet();
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<String> out) throws Exception {
            Results.put("str/" + ctx.getCurrentKey() + "/timer", ts + ":" + count.value());
        }
    }

    /** Long-keyed MapState "tags" and ListState "events", one event-time timer per key. */
    public static final class LongAgg extends KeyedProcessFunction<Long, Long, String> {
        private final boolean restore;
        private transient MapState<String, Long> tags;
        private transient ListState<Long> events;

        LongAgg(boolean restore) {
            this.restore = restore;
        }

        @Override
        public void open(OpenContext ctx) {
            tags =
                    getRuntimeContext()
                            .getMapState(new MapStateDescriptor<>("tags", Types.STRING, Types.LONG));
            events = getRuntimeContext().getListState(new ListStateDescriptor<>("events", Types.LONG));
        }

        @Override
        public void processElement(Long i, Context ctx, Collector<String> out) throws Exception {
            String tag = "t" + (i % 3);
            Long prev = tags.get(tag);
            tags.put(tag, prev == null ? 1 : prev + 1);
            events.add(i);
            long key = ctx.getCurrentKey();
            if (!restore) {
                ctx.timerService().registerEventTimeTimer(longTimer(key));
            } else {
                Results.put("long/" + key + "/tags", tagsString());
                Results.put("long/" + key + "/events", eventsString());
            }
            Results.longSeen.incrementAndGet();
        }

        private String tagsString() throws Exception {
            TreeMap<String, Long> m = new TreeMap<>();
            for (Map.Entry<String, Long> e : tags.entries()) {
                m.put(e.getKey(), e.getValue());
            }
            return m.toString();
        }

        private String eventsString() throws Exception {
            List<Long> l = new ArrayList<>();
            for (Long e : events.get()) {
                l.add(e);
            }
            return l.toString();
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<String> out) throws Exception {
            int n = 0;
            for (Long ignored : events.get()) {
                n++;
            }
            Results.put("long/" + ctx.getCurrentKey() + "/timer", ts + ":" + tagsString() + "/" + n);
        }
    }
}
