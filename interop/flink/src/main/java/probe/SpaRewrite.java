package probe;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.JobManagerOptions;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.runtime.state.StateBackend;
import org.apache.flink.runtime.state.hashmap.HashMapStateBackend;
import org.apache.flink.state.api.OperatorIdentifier;
import org.apache.flink.state.api.OperatorTransformation;
import org.apache.flink.state.api.SavepointReader;
import org.apache.flink.state.api.SavepointWriter;
import org.apache.flink.state.api.functions.KeyedStateBootstrapFunction;
import org.apache.flink.state.api.functions.KeyedStateReaderFunction;
import org.apache.flink.state.api.functions.StateBootstrapFunction;
import org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The peer: rewrites a {@link Probe} savepoint to max parallelism M with Flink's State Processor
 * API, the only way Flink itself offers. Every state of every operator has to be re-declared
 * here by name and type, and the timers read and re-registered by hand.
 *
 * <p>Usage: {@code probe.SpaRewrite SRC DST M [hashmap|rocksdb] [PARALLELISM]}. Needs
 * {@code --add-opens=java.base/java.lang=ALL-UNNAMED} (SPA passes OperatorState through Kryo).
 * Runs as a BATCH job with {@code jobmanager.scheduler: Default}: the default adaptive batch
 * scheduler hangs at 1M keys (research §4).
 */
public final class SpaRewrite {
    private SpaRewrite() {}

    static final long NONE = Long.MIN_VALUE;

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: probe.SpaRewrite SRC DST M [hashmap|rocksdb] [PARALLELISM]");
            System.exit(2);
        }
        String src = args[0];
        String dst = args[1];
        int m = Integer.parseInt(args[2]);
        String backend = args.length > 3 ? args[3] : "hashmap";
        int par = args.length > 4 ? Integer.parseInt(args[4]) : 2;
        long t0 = System.nanoTime();
        rewrite(src, dst, m, backend, par);
        System.out.printf("spa rewrite %s -> %s max parallelism %d (%s, parallelism %d): %.2fs%n",
                src, dst, m, backend, par, (System.nanoTime() - t0) / 1e9);
        System.exit(0);
    }

    static StateBackend backend(String name) {
        return name.equals("rocksdb") ? new EmbeddedRocksDBStateBackend() : new HashMapStateBackend();
    }

    public static void rewrite(String src, String dst, int m, String backendName, int par) throws Exception {
        Configuration conf = new Configuration();
        conf.set(JobManagerOptions.SCHEDULER, JobManagerOptions.SchedulerType.Default);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setRuntimeMode(RuntimeExecutionMode.BATCH);
        env.setParallelism(par);
        StateBackend backend = backend(backendName);
        SavepointReader in = SavepointReader.read(env, src, backend);

        DataStream<Long> offsets = in.readListState(OperatorIdentifier.forUid("src"), "offset", Types.LONG);
        DataStream<Tuple3<String, Long, Long>> strs =
                in.readKeyedState(OperatorIdentifier.forUid("str-counter"), new StrReader(),
                        Types.STRING, Types.TUPLE(Types.STRING, Types.LONG, Types.LONG));
        DataStream<Tuple3<Long, String, Long>> longs =
                in.readKeyedState(OperatorIdentifier.forUid("long-agg"), new LongReader(),
                        Types.LONG, Types.TUPLE(Types.LONG, Types.STRING, Types.LONG));

        SavepointWriter.newSavepoint(env, backend, m)
                .withOperator(OperatorIdentifier.forUid("src"),
                        OperatorTransformation.bootstrapWith(offsets).transform(new OffsetWriter()))
                .withOperator(OperatorIdentifier.forUid("str-counter"),
                        OperatorTransformation.bootstrapWith(strs)
                                .keyBy(t -> t.f0, Types.STRING)
                                .transform(new StrWriter()))
                .withOperator(OperatorIdentifier.forUid("long-agg"),
                        OperatorTransformation.bootstrapWith(longs)
                                .keyBy(t -> t.f0, Types.LONG)
                                .transform(new LongWriter()))
                .write(dst);
        env.execute("spa-rewrite to max parallelism " + m);
    }

    // ---- src: operator ListState<Long> "offset"

    static final class OffsetWriter extends StateBootstrapFunction<Long> implements CheckpointedFunction {
        private transient ListState<Long> state;
        private final List<Long> seen = new ArrayList<>();

        @Override
        public void processElement(Long value, Context ctx) {
            seen.add(value);
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            state.update(seen);
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            state = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("offset", Types.LONG));
        }
    }

    // ---- str-counter: ValueState<Long> "count" + event-time timers.
    // Records: (key, count, NONE) and (key, NONE, eventTimer).

    static final class StrReader extends KeyedStateReaderFunction<String, Tuple3<String, Long, Long>> {
        private transient ValueState<Long> count;

        @Override
        public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void readKey(String key, Context ctx, Collector<Tuple3<String, Long, Long>> out) throws Exception {
            Long c = count.value();
            if (c != null) {
                out.collect(Tuple3.of(key, c, NONE));
            }
            for (Long ts : ctx.registeredEventTimeTimers()) {
                out.collect(Tuple3.of(key, NONE, ts));
            }
        }
    }

    static final class StrWriter extends KeyedStateBootstrapFunction<String, Tuple3<String, Long, Long>> {
        private transient ValueState<Long> count;

        @Override
        public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(Tuple3<String, Long, Long> t, Context ctx) throws Exception {
            if (t.f1 != NONE) {
                count.update(t.f1);
            }
            if (t.f2 != NONE) {
                ctx.timerService().registerEventTimeTimer(t.f2);
            }
        }
    }

    // ---- long-agg: MapState<String,Long> "tags", ListState<Long> "events" + event-time timers.
    // Records: (key, "T" + tag, value), (key, "E", event), (key, "W", eventTimer).

    static final class LongReader extends KeyedStateReaderFunction<Long, Tuple3<Long, String, Long>> {
        private transient MapState<String, Long> tags;
        private transient ListState<Long> events;

        @Override
        public void open(OpenContext ctx) {
            tags = getRuntimeContext().getMapState(new MapStateDescriptor<>("tags", Types.STRING, Types.LONG));
            events = getRuntimeContext().getListState(new ListStateDescriptor<>("events", Types.LONG));
        }

        @Override
        public void readKey(Long key, Context ctx, Collector<Tuple3<Long, String, Long>> out) throws Exception {
            for (Map.Entry<String, Long> e : tags.entries()) {
                out.collect(Tuple3.of(key, "T" + e.getKey(), e.getValue()));
            }
            for (Long e : events.get()) {
                out.collect(Tuple3.of(key, "E", e));
            }
            for (Long ts : ctx.registeredEventTimeTimers()) {
                out.collect(Tuple3.of(key, "W", ts));
            }
        }
    }

    static final class LongWriter extends KeyedStateBootstrapFunction<Long, Tuple3<Long, String, Long>> {
        private transient MapState<String, Long> tags;
        private transient ListState<Long> events;

        @Override
        public void open(OpenContext ctx) {
            tags = getRuntimeContext().getMapState(new MapStateDescriptor<>("tags", Types.STRING, Types.LONG));
            events = getRuntimeContext().getListState(new ListStateDescriptor<>("events", Types.LONG));
        }

        @Override
        public void processElement(Tuple3<Long, String, Long> t, Context ctx) throws Exception {
            switch (t.f1.charAt(0)) {
                case 'T' -> tags.put(t.f1.substring(1), t.f2);
                case 'E' -> events.add(t.f2);
                case 'W' -> ctx.timerService().registerEventTimeTimer(t.f2);
                default -> throw new IllegalStateException("unknown record kind " + t.f1);
            }
        }
    }
}
