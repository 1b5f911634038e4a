// KeyVectors prints Flink's own view of sample keys: the bytes Flink's key
// serializers write, the hashCode() of the object Flink deserializes from
// them, and KeyGroupRangeAssignment's key group at several max
// parallelisms. The Go tests of package keytype check every row.
//
// Run (Java 17, Flink 2.3.0 jars from ~/.m2): see gen.sh next to this file.
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.*;
import org.apache.flink.api.java.tuple.*;
import org.apache.flink.api.java.typeutils.runtime.RowSerializer;
import org.apache.flink.api.java.typeutils.runtime.TupleSerializer;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.runtime.typeutils.RowDataSerializer;
import org.apache.flink.table.types.logical.BigIntType;
import org.apache.flink.table.types.logical.IntType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.VarCharType;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;

public class KeyVectors {
    static final int[] MAX_PARALLELISMS = {8, 128, 256, 32768};
    static PrintStream out;

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void emit(String label, TypeSerializer ser, Object key, String spelling) throws Exception {
        DataOutputSerializer o = new DataOutputSerializer(64);
        ser.serialize(key, o);
        byte[] bytes = o.getCopyOfBuffer();
        Object back = ser.deserialize(new DataInputDeserializer(bytes));
        if (!back.equals(key) && !(key instanceof Double) && !(key instanceof Float)
                && !(key instanceof GenericRowData)) {
            throw new IllegalStateException("round trip changed " + key + " to " + back);
        }
        int hash = back.hashCode();
        snapshot(label, ser);
        StringBuilder sb = new StringBuilder();
        sb.append(label).append('\t');
        sb.append(ser.snapshotConfiguration().getClass().getName()).append('\t');
        List<String> nested = new ArrayList<>();
        if (ser instanceof TupleSerializer) {
            for (TypeSerializer f : ((TupleSerializer<?>) ser).getFieldSerializers()) {
                nested.add(f.snapshotConfiguration().getClass().getName());
            }
        }
        if (ser instanceof RowSerializer) {
            // RowSerializer has no public field accessor; the labels name them.
            nested.addAll(rowFields);
        }
        sb.append(nested.isEmpty() ? "-" : String.join(",", nested)).append('\t');
        sb.append(ser.getLength()).append('\t');
        sb.append(HexFormat.of().formatHex(bytes)).append('\t');
        sb.append(hash);
        for (int m : MAX_PARALLELISMS) {
            sb.append('\t').append(KeyGroupRangeAssignment.assignToKeyGroup(back, m));
        }
        sb.append('\t').append(spelling == null ? "-" : spelling);
        out.println(sb);
    }

    static List<String> rowFields = new ArrayList<>();

    // snapshots: label -> TypeSerializerSnapshotSerializationUtil.writeSerializerSnapshot bytes,
    // what the keyed-state header holds right after its version and compression flag.
    static java.util.LinkedHashMap<String, String> snapshots = new java.util.LinkedHashMap<>();

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void snapshot(String label, TypeSerializer ser) throws Exception {
        DataOutputSerializer o = new DataOutputSerializer(256);
        org.apache.flink.api.common.typeutils.TypeSerializerSnapshotSerializationUtil.writeSerializerSnapshot(o, ser.snapshotConfiguration());
        snapshots.put(label, HexFormat.of().formatHex(o.getCopyOfBuffer()));
    }

    public static void main(String[] args) throws Exception {
        out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        out.println("# Flink 2.3.0 KeyVectors: label, snapshot class, nested snapshot classes, getLength, serialized key hex, hashCode of the deserialized key, key group at 8, 128, 256, 32768, command-line spelling");
        String longStr = "x".repeat(200);
        for (String s : new String[] {"", "a", "k42", "k6540", "été", "日本語", "😀", "\u0080", "\u07ff", "\u0800", "\uffff", "\u0000", longStr, "k1"}) {
            emit("String", StringSerializer.INSTANCE, s, s.equals("\u0000") ? null : s);
        }
        // A lone surrogate: Java strings may hold one; no command-line spelling.
        emit("String", StringSerializer.INSTANCE, "a\ud800b", null);
        for (long v : new long[] {0, 1, -1, 7, -7, 42, 4273, 9999, Long.MAX_VALUE, Long.MIN_VALUE, 1L << 32, -(1L << 32)}) {
            emit("Long", LongSerializer.INSTANCE, v, Long.toString(v));
        }
        for (int v : new int[] {0, 1, -1, 42, -42, Integer.MAX_VALUE, Integer.MIN_VALUE, 123456789}) {
            emit("Integer", IntSerializer.INSTANCE, v, Integer.toString(v));
        }
        for (short v : new short[] {0, 1, -1, 42, Short.MAX_VALUE, Short.MIN_VALUE}) {
            emit("Short", ShortSerializer.INSTANCE, v, Short.toString(v));
        }
        for (byte v : new byte[] {0, 1, -1, 42, Byte.MAX_VALUE, Byte.MIN_VALUE}) {
            emit("Byte", ByteSerializer.INSTANCE, v, Byte.toString(v));
        }
        emit("Boolean", BooleanSerializer.INSTANCE, true, "true");
        emit("Boolean", BooleanSerializer.INSTANCE, false, "false");
        for (char c : new char[] {'a', 'Z', 'é', '\u0000', '\uffff', '日'}) {
            emit("Character", CharSerializer.INSTANCE, c, c == 0 || c == 0xffff ? null : String.valueOf(c));
        }
        for (double v : new double[] {0.0, -0.0, 1.0, 1.5, -2.25, Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, Double.MIN_VALUE, Double.MAX_VALUE, 1e300, 0.1}) {
            emit("Double", DoubleSerializer.INSTANCE, v, Double.toString(v));
        }
        // A NaN with a payload: the serializer writes doubleToLongBits, so
        // it is stored as the canonical NaN anyway.
        emit("Double", DoubleSerializer.INSTANCE, Double.longBitsToDouble(0x7ff0000000000123L), null);
        for (float v : new float[] {0f, -0f, 1f, 1.5f, -2.25f, Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.MIN_VALUE, Float.MAX_VALUE, 0.1f}) {
            emit("Float", FloatSerializer.INSTANCE, v, Float.toString(v));
        }

        TupleSerializer<Tuple1<String>> t1 = new TupleSerializer<>((Class) Tuple1.class, new TypeSerializer[] {StringSerializer.INSTANCE});
        emit("Tuple1<String>", t1, Tuple1.of("k42"), "[\"k42\"]");
        TupleSerializer<Tuple2<String, Long>> t2 = new TupleSerializer<>((Class) Tuple2.class, new TypeSerializer[] {StringSerializer.INSTANCE, LongSerializer.INSTANCE});
        emit("Tuple2<String,Long>", t2, Tuple2.of("k1", 1L), "[\"k1\", 1]");
        emit("Tuple2<String,Long>", t2, Tuple2.of("", -1L), "[\"\", -1]");
        emit("Tuple2<String,Long>", t2, Tuple2.of("été", Long.MIN_VALUE), "[\"été\", -9223372036854775808]");
        emit("Tuple2<String,Long>", t2, Tuple2.of(null, 5L), "[null, 5]");
        TupleSerializer<Tuple3<Integer, Boolean, Double>> t3 = new TupleSerializer<>((Class) Tuple3.class, new TypeSerializer[] {IntSerializer.INSTANCE, BooleanSerializer.INSTANCE, DoubleSerializer.INSTANCE});
        emit("Tuple3<Integer,Boolean,Double>", t3, Tuple3.of(7, true, 2.5), "[7, true, 2.5]");
        emit("Tuple3<Integer,Boolean,Double>", t3, Tuple3.of(-1, false, Double.NaN), "[-1, false, \"NaN\"]");
        TupleSerializer<Tuple4<Short, Byte, Character, Float>> t4 = new TupleSerializer<>((Class) Tuple4.class, new TypeSerializer[] {ShortSerializer.INSTANCE, ByteSerializer.INSTANCE, CharSerializer.INSTANCE, FloatSerializer.INSTANCE});
        emit("Tuple4<Short,Byte,Character,Float>", t4, Tuple4.of((short) -3, (byte) 9, 'q', -0.5f), "[-3, 9, \"q\", -0.5]");
        TypeSerializer[] f25 = new TypeSerializer[25];
        Tuple25 v25 = new Tuple25();
        StringBuilder sp25 = new StringBuilder("[");
        for (int i = 0; i < 25; i++) {
            f25[i] = IntSerializer.INSTANCE;
            v25.setField(i * 1000003, i);
            sp25.append(i == 0 ? "" : ", ").append(i * 1000003);
        }
        sp25.append("]");
        emit("Tuple25<Integer*25>", new TupleSerializer<>((Class) Tuple25.class, f25), v25, sp25.toString());

        rowFields.clear();
        rowFields.add(StringSerializer.INSTANCE.snapshotConfiguration().getClass().getName());
        rowFields.add(LongSerializer.INSTANCE.snapshotConfiguration().getClass().getName());
        RowSerializer rs = new RowSerializer(new TypeSerializer[] {StringSerializer.INSTANCE, LongSerializer.INSTANCE});
        emit("Row<String,Long>", rs, Row.of("a", 1L), "[\"a\", 1]");
        emit("Row<String,Long>", rs, Row.of(null, 2L), "[null, 2]");
        emit("Row<String,Long>", rs, Row.of("k42", null), "[\"k42\", null]");
        emit("Row<String,Long>", rs, Row.of(null, null), "[null, null]");
        emit("Row<String,Long>", rs, Row.ofKind(RowKind.DELETE, "x", 3L), null);
        emit("Row<String,Long>", rs, Row.ofKind(RowKind.UPDATE_BEFORE, "x", 3L), null);

        LogicalType[] kt = {new VarCharType(VarCharType.MAX_LENGTH), new BigIntType()};
        RowDataSerializer rd = new RowDataSerializer(kt);
        emitRowData("RowData<STRING,BIGINT>", rd, GenericRowData.of(StringData.fromString("k1"), 1L));
        emitRowData("RowData<STRING,BIGINT>", rd, GenericRowData.of(StringData.fromString("a string longer than seven bytes"), -5L));
        emitRowData("RowData<STRING,BIGINT>", rd, GenericRowData.of(null, 3L));
        RowDataSerializer ri = new RowDataSerializer(new LogicalType[] {new IntType()});
        emitRowData("RowData<INT>", ri, GenericRowData.of(42));
        emitRowData("RowData<INT>", ri, GenericRowData.of(-1));
        RowDataSerializer r0 = new RowDataSerializer(new LogicalType[] {});
        emitRowData("RowData<>", r0, GenericRowData.of());

        TupleSerializer inner = new TupleSerializer<>((Class) Tuple2.class, new TypeSerializer[] {StringSerializer.INSTANCE, IntSerializer.INSTANCE});
        snapshot("Tuple2<Tuple2<String,Integer>,Long>", new TupleSerializer<>((Class) Tuple2.class, new TypeSerializer[] {inner, LongSerializer.INSTANCE}));
        snapshot("Row<Tuple2<String,Integer>,Boolean>", new RowSerializer(new TypeSerializer[] {inner, BooleanSerializer.INSTANCE}));
        snapshot("BinaryRowData", new org.apache.flink.table.runtime.typeutils.BinaryRowDataSerializer(2));
        org.apache.flink.api.common.serialization.SerializerConfigImpl cfg = new org.apache.flink.api.common.serialization.SerializerConfigImpl();
        TypeSerializer kryo = new org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializer<>(java.util.UUID.class, cfg);
        snapshot("!Kryo", kryo);
        snapshot("!Tuple2<String,Kryo>", new TupleSerializer<>((Class) Tuple2.class, new TypeSerializer[] {StringSerializer.INSTANCE, kryo}));
        snapshot("!MyTuple2", new TupleSerializer<>((Class) MyTuple2.class, new TypeSerializer[] {StringSerializer.INSTANCE, LongSerializer.INSTANCE}));

        if (args.length > 0) {
            try (PrintStream ps = new PrintStream(args[0], StandardCharsets.UTF_8)) {
                ps.println("# Flink 2.3.0 serializer snapshots as the keyed-state header holds them (writeSerializerSnapshot): label (! = must be refused), hex");
                for (java.util.Map.Entry<String, String> e : snapshots.entrySet()) {
                    ps.println(e.getKey() + "\t" + e.getValue());
                }
            }
        }
    }

    /** A user subclass of Tuple2 may override hashCode: rebucket must refuse it. */
    public static class MyTuple2 extends Tuple2<String, Long> {
        @Override
        public int hashCode() {
            return 1;
        }
    }

    static void emitRowData(String label, RowDataSerializer ser, GenericRowData row) throws Exception {
        // The SQL key selector hands BinaryRowData to the partitioner and the
        // backend; so does this.
        org.apache.flink.table.data.binary.BinaryRowData br = ser.toBinaryRow(row, true);
        byte[] rowBytes = org.apache.flink.table.data.binary.BinarySegmentUtils.copyToBytes(br.getSegments(), br.getOffset(), br.getSizeInBytes());
        DataOutputSerializer o = new DataOutputSerializer(64);
        ser.serialize(ser.toBinaryRow(row, true), o);
        emit(label, ser, ser.deserialize(new DataInputDeserializer(o.getCopyOfBuffer())), HexFormat.of().formatHex(rowBytes));
    }
}
