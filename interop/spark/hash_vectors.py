#!/usr/bin/env python3
"""Spark's own hash() and pmod(hash(...), M) for a table of key values, the
vectors of rebucket's Spark partitioner (issue 12).

Prints the TSV to stdout (or writes it to --out). Every value is built in
Spark SQL from the exact spelling in the TSV (hex bytes for strings and
binary, IEEE-754 bits for floating point, unscaled integers for decimals,
days and microseconds for dates and timestamps), so a test can rebuild each
input bit for bit. Spark computes the hashes twice, once constant-folded
(interpreted) and once with ConstantFolding excluded over range(1) (generated
code, as a shuffle does); the script fails if the two disagree.

    hash_vectors.py [--out engine/spark/testdata/hash_vectors.tsv]
"""

import argparse
import math
import struct
import sys

MODS = [2, 3, 8, 200]

HEADER = """\
# Spark's own hash(cols...) (Murmur3_x86_32, seed 42, chained over the columns, a null keeps the
# running hash) and pmod(hash(cols...), M), printed by interop/spark/hash_vectors.py with pyspark {ver}
# (spark.sql.session.timeZone=UTC; interpreted and generated code agreed on every line).
# Columns (tab-separated): types, values, hash, pmod2, pmod3, pmod8, pmod200, note.
#   types   Spark SQL type of each key column, in order, joined by ';'
#           (string binary boolean tinyint smallint int bigint float double date timestamp
#            timestamp_ntz decimal(p,s))
#   values  one per column, joined by ';':
#           null                              SQL NULL of that column's type
#           string, binary                    x<hex of the bytes> (UTF-8 for strings; "x" alone = empty)
#           tinyint smallint int bigint       decimal integer
#           float, double                     0x<IEEE-754 bits, big-endian, 8 or 16 hex digits>
#           boolean                           true | false
#           date                              days since 1970-01-01
#           timestamp, timestamp_ntz          microseconds since 1970-01-01T00:00:00 (UTC)
#           decimal(p,s)                      unscaled value as a decimal integer (value = unscaled * 10^-s)
#   hash    Spark's hash(cols...) as a signed int32
#   pmodM   Spark's pmod(hash(cols...), M)
#   note    human-readable, not for parsing
"""


def fbits(x):
    return "0x" + struct.pack(">f", x).hex()


def dbits(x):
    return "0x" + struct.pack(">d", x).hex()


def s(v):
    return ("string", "x" + v.encode("utf-8").hex(), repr(v))


def b(v):
    return ("binary", "x" + v.hex(), "X'" + v.hex() + "'")


def i(t, v):
    return (t, str(v), str(v))


def f32(v):
    # round through float32 so the bits are those of a float
    x = struct.unpack(">f", struct.pack(">f", v))[0]
    return ("float", fbits(x), repr(x) + "f")


def f64(v):
    return ("double", dbits(v), repr(v))


def dec(p, sc, unscaled):
    return (f"decimal({p},{sc})", str(unscaled), f"{unscaled}e-{sc}")


def null(t):
    return (t, "null", "NULL")


def vectors():
    out = []
    strings = ["", "a", "ab", "abc", "abcd", "abcde", "abcdefg", "abcdefgh", "abcdefghi",
               "k0", "k1", "k42", "é", "naïve", "ключ", "键", "键盘", "🙂", "a🙂", "Ω≈ç",
               "a b", "k\t1", "line\nbreak", "\u0000", "NULL", "x" * 100, "ÿ\u0080"]
    out += [[s(v)] for v in strings]
    out += [[b(v)] for v in [b"", b"\x00", b"\xff", b"\x80", b"\x01\x02\x03\x04\x05", b"\xde\xad\xbe\xef\x00",
                             bytes(range(256))[:17]]]
    out += [[("boolean", "true", "true")], [("boolean", "false", "false")]]
    out += [[i("tinyint", v)] for v in [0, 1, -1, 127, -128]]
    out += [[i("smallint", v)] for v in [0, -1, 32767, -32768]]
    out += [[i("int", v)] for v in [0, 1, -1, 42, 123456789, 2147483647, -2147483648]]
    out += [[i("bigint", v)] for v in [0, 1, -1, 42, 2**31, -(2**31) - 1, 2**32, 1234567890123,
                                        2**63 - 1, -(2**63)]]
    out += [[f32(v)] for v in [0.0, -0.0, math.nan, math.inf, -math.inf, 1.0, -1.5, 3.1415927, 0.1,
                               1e-40, 3.4028234663852886e38]]
    out += [[f64(v)] for v in [0.0, -0.0, math.nan, math.inf, -math.inf, 1.0, -1.5, 3.141592653589793,
                               0.1, 1e-310, 1.7976931348623157e308, 2.0**53 + 2]]
    out += [[i("date", v)] for v in [0, 1, -1, 19000, 2932896, -719162]]
    out += [[i("timestamp", v)] for v in [0, 1, -1, 1700000000123456, -62135596800000000, 253402300799999999]]
    out += [[i("timestamp_ntz", v)] for v in [0, 1700000000123456, -1]]
    out += [[dec(10, 2, v)] for v in [0, 12345, -1, 9999999999]]
    out += [[dec(18, 0, v)] for v in [999999999999999999, -999999999999999999]]
    out += [[dec(19, 0, v)] for v in [0, 1, -1, 127, 128, -129]]
    out += [[dec(38, 10, v)] for v in [0, 12345678901234567890123, -12345678901234567890123]]
    out += [[dec(38, 0, 10**38 - 1)], [dec(38, 0, -(10**38 - 1))]]
    out += [[null(t)] for t in ["string", "binary", "boolean", "int", "bigint", "float", "double", "date",
                                "timestamp", "decimal(10,2)", "decimal(38,10)"]]
    # multi-column keys
    out += [
        [s("k0"), i("int", 0)],
        [s(""), i("int", -1)],
        [s("键"), i("int", 2147483647)],
        [s("abcde"), i("int", -2147483648)],
        [null("string"), i("int", 5)],
        [s("a"), null("int")],
        [null("string"), null("int")],
        [s("a"), s("b")],
        [s(""), s("")],
        [s("b"), s("a")],
        [i("int", 1), i("int", 2)],
        [i("int", 2), i("int", 1)],
        [i("bigint", -1), s("ключ"), f64(-0.0)],
        [i("date", 19000), i("timestamp", 1700000000123456)],
        [("boolean", "true", "true"), b(b"\x00\x01"), dec(10, 2, 12345)],
        [dec(38, 10, 1), null("double"), f32(math.nan)],
        [s("k0"), i("int", 0), i("bigint", 0), null("string"), s("🙂")],
    ]
    return out


def sql_expr(t, v):
    if v == "null":
        return f"CAST(NULL AS {t})"
    if t == "string":
        return f"CAST(X'{v[1:]}' AS STRING)"
    if t == "binary":
        return f"X'{v[1:]}'"
    if t in ("tinyint", "smallint", "int", "bigint"):
        return f"CAST({v} AS {t})"
    if t == "boolean":
        return v
    if t in ("float", "double"):
        # No SQL function makes a float from bits: spell it as a decimal
        # string that parses back to exactly these bits (Python's repr is the
        # shortest round-trip form; Java's parser rounds correctly).
        raw = bytes.fromhex(v[2:])
        x = struct.unpack(">f" if t == "float" else ">d", raw)[0]
        if math.isnan(x):
            lit = "NaN"
        elif math.isinf(x):
            lit = "Infinity" if x > 0 else "-Infinity"
        else:
            lit = repr(x) if t == "double" else _float32_repr(x)
        return f"CAST('{lit}' AS {t})"
    if t == "date":
        return f"date_from_unix_date({v})"
    if t == "timestamp":
        return f"timestamp_micros({v})"
    if t == "timestamp_ntz":
        return f"CAST(timestamp_micros({v}) AS TIMESTAMP_NTZ)"
    if t.startswith("decimal("):
        p, sc = map(int, t[8:-1].split(","))
        u = int(v)
        neg, digits = u < 0, str(abs(u)).rjust(sc + 1, "0")
        lit = ("-" if neg else "") + (digits[:-sc] + "." + digits[-sc:] if sc else digits)
        return f"CAST('{lit}' AS {t})"
    raise ValueError(t)


def _float32_repr(x):
    # shortest decimal that rounds to this float32
    for prec in range(1, 18):
        lit = f"{x:.{prec}g}"
        try:
            if struct.pack(">f", float(lit)) == struct.pack(">f", x):
                return lit
        except OverflowError:  # rounded past the largest float
            pass
    raise AssertionError(x)


def compute(spark, vecs):
    exprs = []
    for n, vec in enumerate(vecs):
        args = ", ".join(sql_expr(t, v) for t, v, _ in vec)
        exprs.append(f"hash({args}) AS h{n}")
        for m in MODS:
            exprs.append(f"pmod(hash({args}), {m}) AS p{m}_{n}")
    folded = spark.sql("SELECT " + ", ".join(exprs)).collect()[0]
    spark.conf.set("spark.sql.optimizer.excludedRules", "org.apache.spark.sql.catalyst.optimizer.ConstantFolding")
    try:
        gen = spark.sql("SELECT " + ", ".join(exprs) + " FROM range(1)").collect()[0]
    finally:
        spark.conf.unset("spark.sql.optimizer.excludedRules")
    if folded.asDict() != gen.asDict():
        bad = [k for k in folded.asDict() if folded[k] != gen[k]]
        raise AssertionError(f"interpreted and generated hash() disagree on {bad[:10]}")
    return folded


def render(spark, vecs, row):
    import pyspark

    lines = [HEADER.format(ver=pyspark.__version__).rstrip("\n")]
    lines.append("types\tvalues\thash\tpmod2\tpmod3\tpmod8\tpmod200\tnote")
    for n, vec in enumerate(vecs):
        types = ";".join(t for t, _, _ in vec)
        vals = ";".join(v for _, v, _ in vec)
        note = ", ".join(c for _, _, c in vec).replace("\t", "\\t").replace("\n", "\\n")
        cells = [types, vals, str(row[f"h{n}"])] + [str(row[f"p{m}_{n}"]) for m in MODS] + [note]
        lines.append("\t".join(cells))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    a = ap.parse_args()
    from pyspark.sql import SparkSession

    vecs = vectors()
    for vec in vecs:  # fail before starting a JVM
        [sql_expr(t, v) for t, v, _ in vec]
    spark = (SparkSession.builder.master("local[1]").appName("hash-vectors")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    text = render(spark, vecs, compute(spark, vecs))
    spark.stop()
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
