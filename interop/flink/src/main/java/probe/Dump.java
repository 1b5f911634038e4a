package probe;

import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.filesystem.FileStateHandle;
import org.apache.flink.runtime.state.filesystem.RelativeFileStateHandle;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;

import java.io.DataInputStream;
import java.io.FileInputStream;
import java.nio.file.Paths;
import java.util.Map;
import java.util.TreeMap;

/**
 * Prints a savepoint's _metadata as Flink itself reads it (Checkpoints.loadCheckpointMetadata):
 * operators, parallelism, max parallelism, and every handle with its type, key-group range and
 * offsets. A debugging aid and the ground truth for rebucket's own _metadata decoder.
 *
 * <p>Usage: {@code probe.Dump SAVEPOINT_DIR...}
 */
public final class Dump {
    private Dump() {}

    public static void main(String[] args) throws Exception {
        for (String dir : args) {
            String meta = Paths.get(dir, "_metadata").toString();
            CheckpointMetadata md;
            try (DataInputStream in = new DataInputStream(new FileInputStream(meta))) {
                md = Checkpoints.loadCheckpointMetadata(in, Dump.class.getClassLoader(), dir);
            }
            System.out.printf("%s: checkpointId=%d masterStates=%d properties=%s%n",
                    dir, md.getCheckpointId(), md.getMasterStates().size(), md.getCheckpointProperties());
            for (OperatorState op : md.getOperatorStates()) {
                System.out.printf("  operator id=%s uid=%s name=%s parallelism=%d maxParallelism=%d subtaskStates=%d%s%n",
                        op.getOperatorID(), op.getOperatorUid().orElse("-"), op.getOperatorName().orElse("-"),
                        op.getParallelism(), op.getMaxParallelism(), op.getSubtaskStates().size(),
                        op.isFullyFinished() ? " FULLY_FINISHED" : "");
                Map<Integer, OperatorSubtaskState> subs = new TreeMap<>(op.getSubtaskStates());
                for (Map.Entry<Integer, OperatorSubtaskState> e : subs.entrySet()) {
                    OperatorSubtaskState s = e.getValue();
                    for (OperatorStateHandle h : s.getManagedOperatorState()) {
                        System.out.printf("    subtask %d managed operator state %s: %s%n", e.getKey(),
                                h.getStateNameToPartitionOffsets(), stream(h.getDelegateStateHandle()));
                    }
                    for (KeyedStateHandle h : s.getManagedKeyedState()) {
                        System.out.printf("    subtask %d managed keyed: %s%n", e.getKey(), keyed(h));
                    }
                    for (KeyedStateHandle h : s.getRawKeyedState()) {
                        System.out.printf("    subtask %d RAW keyed: %s%n", e.getKey(), keyed(h));
                    }
                }
            }
        }
    }

    static String keyed(KeyedStateHandle h) {
        if (h instanceof KeyGroupsStateHandle k) {
            StringBuilder off = new StringBuilder();
            for (int kg : k.getKeyGroupRange()) {
                off.append(off.length() == 0 ? "" : ",").append(k.getOffsetForKeyGroup(kg));
            }
            return String.format("%s key groups %d..%d offsets [%s] in %s", h.getClass().getSimpleName(),
                    k.getKeyGroupRange().getStartKeyGroup(), k.getKeyGroupRange().getEndKeyGroup(), off,
                    stream(k.getDelegateStateHandle()));
        }
        return h.getClass().getSimpleName() + " key groups " + h.getKeyGroupRange();
    }

    static String stream(StreamStateHandle h) {
        if (h instanceof ByteStreamStateHandle b) {
            return "inline " + b.getData().length + " bytes";
        }
        if (h instanceof RelativeFileStateHandle r) {
            return "relative file " + r.getRelativePath() + " (" + r.getStateSize() + " bytes)";
        }
        if (h instanceof FileStateHandle f) {
            return "file " + f.getFilePath() + " (" + f.getStateSize() + " bytes)";
        }
        return h.getClass().getName();
    }
}
