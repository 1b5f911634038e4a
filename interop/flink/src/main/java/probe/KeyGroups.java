package probe;

import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.binary.BinaryRowData;
import org.apache.flink.table.data.writer.BinaryRowWriter;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.flink.table.types.logical.BigIntType;
import org.apache.flink.table.types.logical.DoubleType;
import org.apache.flink.table.types.logical.IntType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.VarCharType;
import org.apache.flink.util.MathUtils;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * Prints Flink's own key-group assignment for sample keys of every key type rebucket rehashes,
 * as a TSV the Go side checks itself against (engine/flink/testdata/keygroup_vectors.tsv).
 *
 * <p>Usage: {@code probe.KeyGroups [OUT.tsv]} (stdout when no file is given).
 *
 * <p>Columns: type (the Flink type), value (machine form, see below), key_hex (the key's bytes
 * as its Flink key serializer writes them, i.e. the key part of a state key), serializer (the
 * serializer class), hashcode (Java hashCode() of the key, signed decimal), murmur
 * (MathUtils.murmurHash(hashCode), as used by KeyGroupRangeAssignment), kg8, kg128, kg256,
 * kg32768 (KeyGroupRangeAssignment.assignToKeyGroup(key, M) for M = 8, 128, 256, 32768).
 *
 * <p>Value forms: String and Character: every UTF-16 unit outside printable ASCII (and the
 * backslash and '|') as {@code \\uXXXX}, so lone surrogates are exact; integers in decimal;
 * Boolean true/false; Double/Float as raw IEEE bits in hex ({@code 0x...}, from
 * doubleToRawLongBits, so a non-canonical NaN is visible) then {@code ~} and Java's toString;
 * Tuples and rows: fields in that form joined by {@code |}.
 */
public final class KeyGroups {
    private KeyGroups() {}

    static final int[] MAX_PARALLELISMS = {8, 128, 256, 32768};
    static final SerializerConfigImpl CONFIG = new SerializerConfigImpl();

    public static void main(String[] args) throws Exception {
        PrintStream out =
                args.length > 0
                        ? new PrintStream(args[0], StandardCharsets.UTF_8)
                        : new PrintStream(System.out, true, StandardCharsets.UTF_8);
        out.println("# Flink 2.3.0 KeyGroupRangeAssignment vectors, made by interop/flink probe.KeyGroups."
                + " value forms: see KeyGroups.java. kgM = assignToKeyGroup(key, M).");
        out.print("type\tvalue\tkey_hex\tserializer\thashcode\tmurmur");
        for (int m : MAX_PARALLELISMS) {
            out.print("\tkg" + m);
        }
        out.println();

        List<String> strings =
                List.of("", "a", "k0", "k42", "k199", "k6540", "hello world", "été", "Ünïcödé ß",
                        "日本語", "\u0000", "\u007f", "\u0080", "\u07ff", "\u0800", "\uffff",
                        "😀", "a😀b", "\ud83d", "\ude00x", "x".repeat(127), "y".repeat(128),
                        "z".repeat(300), "t1");
        for (String s : strings) {
            row(out, "String", Types.STRING, s, str(s));
        }
        long[] longs = {0, 1, -1, 7, -7, 42, 4273, 9999, -100, 99, 127, 128, 255, 256, 65535,
                4294967295L, 4294967296L, -4294967296L, Long.MAX_VALUE, Long.MIN_VALUE,
                Integer.MAX_VALUE, Integer.MIN_VALUE, 0x123456789abcdefL};
        for (long v : longs) {
            row(out, "Long", Types.LONG, v, Long.toString(v));
        }
        int[] ints = {0, 1, -1, 7, -7, 42, 9999, 65536, Integer.MAX_VALUE, Integer.MIN_VALUE, -123456789};
        for (int v : ints) {
            row(out, "Integer", Types.INT, v, Integer.toString(v));
        }
        short[] shorts = {0, 1, -1, 255, Short.MAX_VALUE, Short.MIN_VALUE};
        for (short v : shorts) {
            row(out, "Short", Types.SHORT, v, Short.toString(v));
        }
        byte[] bytes = {0, 1, -1, 127, -128, 42};
        for (byte v : bytes) {
            row(out, "Byte", Types.BYTE, v, Byte.toString(v));
        }
        for (boolean v : new boolean[] {true, false}) {
            row(out, "Boolean", Types.BOOLEAN, v, Boolean.toString(v));
        }
        char[] chars = {'a', 'Z', '0', '\u0000', 'é', '\u20ac', '\ud83d', '\uffff'};
        for (char v : chars) {
            row(out, "Character", Types.CHAR, v, str(String.valueOf(v)));
        }
        double[] doubles = {0.0, -0.0, 1.0, -1.0, 0.1, 3.141592653589793, Double.NaN,
                Double.longBitsToDouble(0x7ff0000000000001L), Double.longBitsToDouble(0xfff8000000000000L),
                Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, Double.MAX_VALUE, Double.MIN_VALUE,
                -Double.MAX_VALUE, 1e300, 42.0};
        for (double v : doubles) {
            row(out, "Double", Types.DOUBLE, v, dbl(v));
        }
        float[] floats = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, Float.NaN, Float.intBitsToFloat(0x7f800001),
                Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.MAX_VALUE, Float.MIN_VALUE,
                -Float.MAX_VALUE, 42.0f};
        for (float v : floats) {
            row(out, "Float", Types.FLOAT, v, flt(v));
        }

        TypeInformation<Tuple2<String, Long>> tSL = Types.TUPLE(Types.STRING, Types.LONG);
        for (Tuple2<String, Long> t : List.of(Tuple2.of("k1", 1L), Tuple2.of("", -1L), Tuple2.of("été", Long.MIN_VALUE),
                Tuple2.of("😀", 42L))) {
            row(out, "Tuple2<String,Long>", tSL, t, str(t.f0) + "|" + t.f1);
        }
        TypeInformation<Tuple2<Integer, String>> tIS = Types.TUPLE(Types.INT, Types.STRING);
        for (Tuple2<Integer, String> t : List.of(Tuple2.of(0, "a"), Tuple2.of(-7, "k42"), Tuple2.of(Integer.MIN_VALUE, ""))) {
            row(out, "Tuple2<Integer,String>", tIS, t, t.f0 + "|" + str(t.f1));
        }
        TypeInformation<Tuple2<Long, Long>> tLL = Types.TUPLE(Types.LONG, Types.LONG);
        for (Tuple2<Long, Long> t : List.of(Tuple2.of(1L, 2L), Tuple2.of(-1L, Long.MAX_VALUE))) {
            row(out, "Tuple2<Long,Long>", tLL, t, t.f0 + "|" + t.f1);
        }
        TypeInformation<Tuple3<String, Integer, Double>> tSID = Types.TUPLE(Types.STRING, Types.INT, Types.DOUBLE);
        for (Tuple3<String, Integer, Double> t : List.of(Tuple3.of("x", 1, 0.5), Tuple3.of("", -1, Double.NaN),
                Tuple3.of("été", 0, -0.0))) {
            row(out, "Tuple3<String,Integer,Double>", tSID, t, str(t.f0) + "|" + t.f1 + "|" + dbl(t.f2));
        }
        TypeInformation<Tuple3<Boolean, Short, Character>> tBSC = Types.TUPLE(Types.BOOLEAN, Types.SHORT, Types.CHAR);
        for (Tuple3<Boolean, Short, Character> t : List.of(Tuple3.of(true, (short) -1, 'é'), Tuple3.of(false, (short) 0, 'a'))) {
            row(out, "Tuple3<Boolean,Short,Character>", tBSC, t, t.f0 + "|" + t.f1 + "|" + str(String.valueOf(t.f2)));
        }
        TypeInformation<Tuple3<Byte, Float, Long>> tBFL = Types.TUPLE(Types.BYTE, Types.FLOAT, Types.LONG);
        for (Tuple3<Byte, Float, Long> t : List.of(Tuple3.of((byte) -128, -0.0f, 5L), Tuple3.of((byte) 1, Float.NaN, -5L))) {
            row(out, "Tuple3<Byte,Float,Long>", tBFL, t, t.f0 + "|" + flt(t.f1) + "|" + t.f2);
        }

        // Table/SQL keys: BinaryRowData through the serializer the planner's key type makes.
        rows(out, "Row<BIGINT>", new LogicalType[] {new BigIntType()},
                new Object[][] {{0L}, {1L}, {-1L}, {42L}, {Long.MAX_VALUE}, {Long.MIN_VALUE}});
        rows(out, "Row<INT>", new LogicalType[] {new IntType()}, new Object[][] {{0}, {7}, {-7}});
        rows(out, "Row<STRING>", new LogicalType[] {VarCharType.STRING_TYPE},
                new Object[][] {{""}, {"k42"}, {"été"}, {"a string longer than seven bytes"}});
        rows(out, "Row<INT,STRING>", new LogicalType[] {new IntType(), VarCharType.STRING_TYPE},
                new Object[][] {{1, "a"}, {-1, "été"}, {Integer.MAX_VALUE, "0123456789abcdef"}});
        rows(out, "Row<STRING,BIGINT,DOUBLE>",
                new LogicalType[] {VarCharType.STRING_TYPE, new BigIntType(), new DoubleType()},
                new Object[][] {{"x", 5L, 0.5}, {"", -5L, -0.0}});
        out.flush();
        if (args.length > 0) {
            out.close();
        }
    }

    static <T> void row(PrintStream out, String type, TypeInformation<T> ti, T key, String value) throws Exception {
        TypeSerializer<T> ser = ti.createSerializer(CONFIG);
        DataOutputSerializer buf = new DataOutputSerializer(64);
        ser.serialize(key, buf);
        emit(out, type, value, buf.getCopyOfBuffer(), ser.getClass().getName(), key);
    }

    static void emit(PrintStream out, String type, String value, byte[] keyBytes, String serClass, Object key) {
        int h = key.hashCode();
        StringBuilder sb = new StringBuilder();
        sb.append(type).append('\t').append(value).append('\t').append(HexFormat.of().formatHex(keyBytes))
                .append('\t').append(serClass).append('\t').append(h).append('\t').append(MathUtils.murmurHash(h));
        for (int m : MAX_PARALLELISMS) {
            sb.append('\t').append(KeyGroupRangeAssignment.assignToKeyGroup(key, m));
        }
        out.println(sb);
    }

    static void rows(PrintStream out, String type, LogicalType[] fields, Object[][] values) throws Exception {
        InternalTypeInfo<RowData> ti = InternalTypeInfo.of(RowType.of(fields));
        TypeSerializer<RowData> ser = ti.createSerializer(CONFIG);
        for (Object[] vals : values) {
            BinaryRowData r = new BinaryRowData(fields.length);
            BinaryRowWriter w = new BinaryRowWriter(r);
            List<String> shown = new ArrayList<>();
            for (int i = 0; i < vals.length; i++) {
                Object v = vals[i];
                if (v instanceof Long l) {
                    w.writeLong(i, l);
                    shown.add(l.toString());
                } else if (v instanceof Integer n) {
                    w.writeInt(i, n);
                    shown.add(n.toString());
                } else if (v instanceof Double d) {
                    w.writeDouble(i, d);
                    shown.add(dbl(d));
                } else {
                    w.writeString(i, StringData.fromString((String) v));
                    shown.add(str((String) v));
                }
            }
            w.complete();
            DataOutputSerializer buf = new DataOutputSerializer(64);
            ser.serialize(r, buf);
            emit(out, type, String.join("|", shown), buf.getCopyOfBuffer(), ser.getClass().getName(), r);
        }
    }

    static String str(String s) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c >= 0x20 && c < 0x7f && c != '\\' && c != '|') {
                sb.append(c);
            } else {
                sb.append(String.format("\\u%04x", (int) c));
            }
        }
        return sb.toString();
    }

    static String dbl(double d) {
        return String.format("0x%016x~%s", Double.doubleToRawLongBits(d), Double.toString(d));
    }

    static String flt(float f) {
        return String.format("0x%08x~%s", Float.floatToRawIntBits(f), Float.toString(f));
    }

}
