// Baseline for bench/run.py: Flink's own _metadata reader, as a process.
//   java -cp <pyflink/lib/*>:<classes> FlinkRefs parse  <_metadata>
//   java -cp <pyflink/lib/*>:<classes> FlinkRefs ndjson <_metadata> <out>
// "ndjson" writes one JSON line per file reference with the same columns as
// `ckptctl refs --format ndjson`, so both sides produce the same bytes of output.
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.flink.runtime.checkpoint.*;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.*;
import org.apache.flink.runtime.state.filesystem.*;

public class FlinkRefs {
    static Writer out;
    static String ckpt, job, kind = "checkpoint";
    static long cid;

    public static void main(String[] args) throws Exception {
        File f = new File(args[1]);
        String dir = f.getParentFile().getAbsolutePath();
        CheckpointMetadata md;
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(f), 1 << 20))) {
            md = Checkpoints.loadCheckpointMetadata(in, FlinkRefs.class.getClassLoader(), dir);
        }
        if (args[0].equals("parse")) {
            System.out.println(md.getOperatorStates().size());
            return;
        }
        ckpt = "file:" + dir;
        job = new File(dir).getParentFile().getName();
        cid = md.getCheckpointId();
        out = new BufferedWriter(new OutputStreamWriter(new FileOutputStream(args[2]), StandardCharsets.UTF_8), 1 << 20);
        for (OperatorState op : md.getOperatorStates()) {
            String opId = op.getOperatorID().toHexString();
            for (Map.Entry<Integer, OperatorSubtaskState> e : op.getSubtaskStates().entrySet()) {
                int sub = e.getKey();
                for (KeyedStateHandle h : e.getValue().getManagedKeyedState()) keyed(opId, sub, "managed_keyed", h);
                for (KeyedStateHandle h : e.getValue().getRawKeyedState()) keyed(opId, sub, "raw_keyed", h);
                for (OperatorStateHandle h : e.getValue().getManagedOperatorState()) stream(opId, sub, "managed_operator", "exclusive", null, null, h.getDelegateStateHandle());
                for (OperatorStateHandle h : e.getValue().getRawOperatorState()) stream(opId, sub, "raw_operator", "exclusive", null, null, h.getDelegateStateHandle());
            }
        }
        out.close();
    }

    static void keyed(String op, int sub, String slot, KeyedStateHandle h) throws IOException {
        KeyGroupRange r = h.getKeyGroupRange();
        if (h instanceof IncrementalRemoteKeyedStateHandle) {
            IncrementalRemoteKeyedStateHandle inc = (IncrementalRemoteKeyedStateHandle) h;
            stream(op, sub, slot, "metadata", null, r, inc.getMetaDataStateHandle());
            for (IncrementalKeyedStateHandle.HandleAndLocalPath p : inc.getSharedState()) stream(op, sub, slot, "shared", p.getLocalPath(), r, p.getHandle());
            for (IncrementalKeyedStateHandle.HandleAndLocalPath p : inc.getPrivateState()) stream(op, sub, slot, "private", p.getLocalPath(), r, p.getHandle());
        } else if (h instanceof KeyGroupsStateHandle) {
            stream(op, sub, slot, "exclusive", null, r, ((KeyGroupsStateHandle) h).getDelegateStateHandle());
        }
    }

    static void stream(String op, int sub, String slot, String scope, String local, KeyGroupRange r, StreamStateHandle h) throws IOException {
        String type, path, written;
        if (h instanceof RelativeFileStateHandle) {
            type = "RelativeFileStateHandle";
            written = ((RelativeFileStateHandle) h).getRelativePath();
            path = ckpt + "/" + written;
        } else if (h instanceof FileStateHandle) {
            type = "FileStateHandle";
            path = written = ((FileStateHandle) h).getFilePath().toString();
        } else {
            return;
        }
        StringBuilder b = new StringBuilder(640);
        b.append("{\"checkpoint\":\"").append(ckpt).append("\",\"job_id\":\"").append(job)
         .append("\",\"checkpoint_id\":").append(cid).append(",\"kind\":\"").append(kind)
         .append("\",\"operator_id\":\"").append(op).append("\",\"operator_name\":null,\"subtask\":").append(sub)
         .append(",\"slot\":\"").append(slot).append("\",\"scope\":\"").append(scope)
         .append("\",\"handle_type\":\"").append(type).append("\",\"local_name\":")
         .append(local == null ? "null" : "\"" + local + "\"")
         .append(",\"path\":\"").append(path).append("\",\"written_path\":\"").append(written)
         .append("\",\"offset\":0,\"size\":").append(h.getStateSize())
         .append(",\"key_group_start\":").append(r == null ? "null" : String.valueOf(r.getStartKeyGroup()))
         .append(",\"key_group_end\":").append(r == null ? "null" : String.valueOf(r.getEndKeyGroup()))
         .append("}\n");
        out.write(b.toString());
    }
}
