"""Prints Spark's own hash() and pmod(hash(), M) for a table of key values,
as engine/spark/testdata/hash_vectors.tsv (read by sparkhash's Go test).

Run: python gen_hash_vectors.py > hash_vectors.tsv   (pyspark 4.3.0, Java 17)

Each line: type list (JSON), values (JSON, typed as the Go test reads
them), Spark's hash(...), then pmod(hash, M) for M = 2, 3, 8, 200.
hash() is Murmur3Hash(children, seed 42), the same expression
HashPartitioning uses to place a state key.
"""
import json
from pyspark.sql import SparkSession

# (type, SQL literal, JSON value for Go). Values for Go: long/int as
# numbers or strings, double as strings ("NaN", "-0.0"), binary as hex,
# decimal as string, date as days, timestamp as micros.
S = lambda v: ("string", "'" + v.replace("'", "\\'") + "'" if v is not None else "CAST(NULL AS STRING)", v)
I = lambda v: ("integer", f"CAST({v} AS INT)" if v is not None else "CAST(NULL AS INT)", v)
L = lambda v: ("long", f"CAST({v} AS BIGINT)" if v is not None else "CAST(NULL AS BIGINT)", str(v) if v is not None else None)
D = lambda v: ("double", f"CAST('{v}' AS DOUBLE)", v)
F = lambda v: ("float", f"CAST('{v}' AS FLOAT)", v)
B = lambda v: ("boolean", "true" if v else "false", v)
BIN = lambda h: ("binary", f"X'{h}'", h)
DT = lambda days: ("date", f"DATE_ADD(DATE'1970-01-01', {days})", days)
TS = lambda us: ("timestamp", f"TIMESTAMP_MICROS({us})", str(us))
DEC = lambda p, s, v: (f"decimal({p},{s})", f"CAST('{v}' AS DECIMAL({p},{s}))", v)
SH = lambda v: ("short", f"CAST({v} AS SMALLINT)", v)
BY = lambda v: ("byte", f"CAST({v} AS TINYINT)", v)

cases = []
for s in ["", "a", "ab", "abc", "abcd", "abcde", "k0", "k1", "key-12345", "é", "héllo", "漢字", "日本語テキスト", "\u00ff\u00fe", "a" * 100]:
    cases.append([S(s)])
cases.append([S(None)])
for v in [0, 1, -1, 42, 2147483647, -2147483648, 123456789]:
    cases.append([I(v)])
cases.append([I(None)])
for v in [0, 1, -1, 9223372036854775807, -9223372036854775808, 4294967296, 1234567890123]:
    cases.append([L(v)])
for v in ["0.0", "-0.0", "1.5", "-2.25", "NaN", "Infinity", "-Infinity", "3.141592653589793"]:
    cases.append([D(v)])
for v in ["0.0", "-0.0", "1.5", "NaN"]:
    cases.append([F(v)])
cases += [[B(True)], [B(False)], [BIN("")], [BIN("00")], [BIN("deadbeef01")], [BIN("ff80")]]
cases += [[DT(0)], [DT(19000)], [DT(-1)], [TS(0)], [TS(1700000000123456)], [TS(-1)]]
cases += [[DEC(10, 2, "123.45")], [DEC(10, 2, "-0.01")], [DEC(18, 0, "999999999999999999")],
          [DEC(38, 5, "12345678901234567890.12345")], [DEC(38, 0, "-1")], [DEC(20, 0, "128")], [DEC(38, 10, "0")]]
cases += [[SH(-3)], [BY(-128)], [BY(127)]]
cases += [[S("a"), I(1)], [S("k7"), I(-5)], [S(None), I(3)], [S("x"), I(None)], [I(1), S("a")],
          [L(7), S("z"), D("2.5")], [S(""), S("")], [S("u"), L(None), B(True)], [DT(5), TS(6), DEC(5, 1, "1.5")]]

spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
exprs = []
for c in cases:
    args = ", ".join(x[1] for x in c)
    exprs.append(f"hash({args})")
    exprs += [f"pmod(hash({args}), {m})" for m in (2, 3, 8, 200)]
row = spark.sql("SELECT " + ", ".join(exprs)).collect()[0]
for i, c in enumerate(cases):
    h, *pm = row[5 * i:5 * i + 5]
    types = [x[0] for x in c]
    vals = [x[2] for x in c]
    print(json.dumps(types, ensure_ascii=False), json.dumps(vals, ensure_ascii=False), h, *pm, sep="\t")
spark.stop()
