"""Spark 3.5 restart oracle (no statestore reader there): rewrite 2->8 and
2->3, restart on a new input file with foreachBatch, and check the restart
batch's output rows against the reference query over all input, and the
number of state store instances."""
import json, os, sys, subprocess, shutil
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
base, out = sys.argv[1], sys.argv[2]
rw = os.environ["REBUCKET_SPARK_REWRITE"]
os.makedirs(out, exist_ok=True)
spark = (SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "2")
         .config("spark.ui.enabled", "false").getOrCreate())
print("SPARK VERSION", spark.version, flush=True)
schema = "k string, n int, id long, v double"
builds = {
    "agg_str": (lambda df: df.groupBy("k").count(), "update", ["k"]),
    "agg_str_int": (lambda df: df.groupBy("k", "n").agg(F.sum("v").alias("s"), F.count("*").alias("c")), "update", ["k", "n"]),
    "agg_long": (lambda df: df.groupBy("id").agg(F.max("v")), "update", ["id"]),
    "dedup": (lambda df: df.dropDuplicates(["k"]), "append", ["k"]),
}
ok = True
for name, (build, mode, keys) in builds.items():
    indir = f"{base}/{name}-in"
    b3 = f"{indir}/b3.json"
    if not os.path.exists(b3):
        with open(b3, "w") as f:
            for i in range(60):
                j = (i * 11 + 5) % 70
                f.write(json.dumps({"k": f"k{j}", "n": j % 3, "id": j * 1000003, "v": j / 4}) + "\n")
    allin = spark.read.schema(schema).json(indir)
    if name == "dedup":
        old = set(r["k"] for r in spark.read.schema(schema).json([f"{indir}/b{b}.json" for b in range(3)]).collect())
        new = set(r["k"] for r in spark.read.schema(schema).json(b3).collect())
        ref = {(k,): () for k in new - old}
    else:
        ref = {tuple(r[c] for c in keys): tuple(v for c, v in r.asDict().items() if c not in keys) for r in build(allin).collect()}
    for m in (None, 8, 3):
        ck = f"{out}/{name}-{m or 'orig'}"
        shutil.rmtree(ck, ignore_errors=True)
        if m:
            r = subprocess.run([rw, "rewrite", f"{base}/{name}", ck, str(m)], capture_output=True, text=True)
            if r.returncode != 0:
                print("REWRITE FAILED", name, m, r.stderr, flush=True); ok = False; continue
        else:
            shutil.copytree(f"{base}/{name}", ck)
        got = {}
        def fb(df, bid):
            for r in df.collect():
                got[tuple(r[c] for c in keys)] = tuple(v for c, v in r.asDict().items() if c not in keys) if name != "dedup" else ()
        q = build(spark.readStream.schema(schema).json(indir)).writeStream.foreachBatch(fb).outputMode(mode) \
            .option("checkpointLocation", ck).trigger(availableNow=True).start()
        q.awaitTermination()
        so = q.lastProgress["stateOperators"][0]
        good = len(got) > 0 and all(ref.get(k) == v for k, v in got.items())
        if name == "dedup":
            good = set(got) == set(ref)
        print(f"ORACLE35 {name} {m or 'orig'}: output_rows={len(got)} all_match_reference={good} "
              f"numStateStoreInstances={so.get('numStateStoreInstances')}", flush=True)
        if not good or so.get("numStateStoreInstances") != (m or 2):
            ok = False
print("ORACLE35 ALL OK" if ok else "ORACLE35 FAILED", flush=True)
spark.stop()
