package probe;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;

import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * One MiniCluster per JVM, shared by every job the JVM runs: starting a cluster costs seconds,
 * and the test driver runs many short jobs. It has enough slots for the widest restore (40).
 */
final class Cluster implements AutoCloseable {
    static final int SLOTS = 40;

    final MiniCluster mc;

    Cluster() throws Exception {
        Configuration conf = new Configuration();
        conf.set(RestOptions.BIND_PORT, "0");
        // 40 subtasks of RocksDB share the managed memory; give them room.
        conf.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, MemorySize.parse("512m"));
        conf.set(TaskManagerOptions.NETWORK_MEMORY_MIN, MemorySize.parse("256m"));
        conf.set(TaskManagerOptions.NETWORK_MEMORY_MAX, MemorySize.parse("256m"));
        mc =
                new MiniCluster(
                        new MiniClusterConfiguration.Builder()
                                .setConfiguration(conf)
                                .setNumTaskManagers(1)
                                .setNumSlotsPerTaskManager(SLOTS)
                                .build());
        mc.start();
    }

    JobID submit(JobGraph job) throws Exception {
        mc.submitJob(job).get(60, TimeUnit.SECONDS);
        return job.getJobID();
    }

    /** Waits for the job to end and throws Flink's own error if it failed. */
    void await(JobID id) throws Exception {
        JobResult r = mc.requestJobResult(id).get();
        r.toJobExecutionResult(Cluster.class.getClassLoader());
    }

    /** Polls cond until true; fails early if the job ends first. */
    void waitFor(JobID id, BooleanSupplier cond, long timeoutMs, String what) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!cond.getAsBoolean()) {
            JobStatus st = mc.getJobStatus(id).get();
            if (st.isGloballyTerminalState()) {
                await(id);
                throw new IllegalStateException("job ended (" + st + ") before " + what);
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("timed out waiting for " + what);
            }
            Thread.sleep(20);
        }
    }

    String savepoint(JobID id, String dir, SavepointFormatType type) throws Exception {
        return mc.triggerSavepoint(id, dir, false, type).get(300, TimeUnit.SECONDS);
    }

    void cancel(JobID id) throws Exception {
        mc.cancelJob(id).get();
        try {
            mc.requestJobResult(id).get();
        } catch (Exception ignored) {
            // a cancelled job reports failure; it is what we asked for
        }
    }

    @Override
    public void close() throws Exception {
        mc.close();
    }
}
