"""Spark restart oracle for engine/spark.Rewrite (pyspark 4.3.0, Java 17).

Usage: REBUCKET_SPARK_REWRITE=<prog> python restart_oracle.py <checkpoints dir> <out dir>
<prog> is called as "<prog> rewrite SRC DST M" (a thin driver of
engine/spark.Rewrite; with the CLI wired: rebucket rewrite SRC --buckets M
--out DST). The checkpoints dir is what make_checkpoints*.py wrote (with the
*-in input dirs). Each checkpoint is rewritten 2->8 and 2->3, restarted on a
new input file, and compared (see FORMAT.md). Prints ORACLE... lines.
"""
import json, os, sys, subprocess, shutil, collections
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
base = sys.argv[1]; out = sys.argv[2]
os.makedirs(out, exist_ok=True)
spark = (SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "2")
         .config("spark.ui.enabled", "false").getOrCreate())
schema = "k string, n int, id long, v double"
def agg_str(df): return df.groupBy("k").count()
def agg_str_int(df): return df.groupBy("k", "n").agg(F.sum("v").alias("s"), F.count("*").alias("c"))
def agg_long(df): return df.groupBy("id").agg(F.max("v"))
def dedup(df): return df.dropDuplicates(["k"])
modes = {"agg_str": "update", "agg_str_int": "update", "agg_long": "update", "dedup": "append"}
keys = {"agg_str": ["k"], "agg_str_int": ["k", "n"], "agg_long": ["id"], "dedup": ["k"]}
builds = {"agg_str": agg_str, "agg_str_int": agg_str_int, "agg_long": agg_long, "dedup": dedup}
ok = True
for name in ["agg_str", "agg_str_int", "agg_long", "dedup"]:
    indir = f"{base}/{name}-in"
    with open(f"{indir}/b3.json", "w") as f:
        for i in range(60):
            j = (i * 11 + 5) % 70
            f.write(json.dumps({"k": f"k{j}", "n": j % 3, "id": j * 1000003, "v": j / 4}) + "\n")
    # reference: the same query over all input at once, no rebucketing
    ref = builds[name](spark.read.schema(schema).json(indir))
    kc = keys[name]
    refrows = {tuple(r[c] for c in kc): tuple(r[c] for c in r.asDict() if c not in kc) for r in ref.collect()}
    for m in (8, 3):
        ck = f"{out}/{name}-{m}"
        shutil.rmtree(ck, ignore_errors=True)
        r = subprocess.run([os.environ.get("REBUCKET_SPARK_REWRITE", "rebucket-spark-rewrite"), "rewrite", f"{base}/{name}", ck, str(m)], capture_output=True, text=True)
        if r.returncode != 0:
            print("REWRITE FAILED", name, m, r.stderr, flush=True); ok = False; continue
        df = spark.readStream.schema(schema).json(indir)
        q = builds[name](df).writeStream.format("noop").outputMode(modes[name]).option("checkpointLocation", ck).trigger(availableNow=True).start()
        q.awaitTermination()
        prog = q.lastProgress
        so = prog["stateOperators"][0] if prog and prog["stateOperators"] else {}
        st = spark.read.format("statestore").load(ck)
        hashexpr = "pmod(hash(" + ", ".join("key." + c for c in kc) + f"), {m})"
        bad = st.where(f"partition_id != {hashexpr}").count()
        rows = st.collect()
        got = {}
        for row in rows:
            k = tuple(row["key"][c] for c in kc)
            got[k] = tuple(row["value"]) if name != "dedup" else ()
        if name == "dedup":
            refk = set(refrows)
            same = set(got) == refk
        else:
            # state value columns for agg: compare the aggregate result columns
            same = all(k in got for k in refrows) and len(got) == len(refrows)
            if name == "agg_str":
                same = same and all(got[k][0] == refrows[k][0] for k in refrows)
            if name == "agg_long":
                same = same and all(got[k][0] == refrows[k][0] for k in refrows)
        print(f"ORACLE {name} ->{m}: rows={len(got)} ref={len(refrows)} misplaced={bad} same={same} "
              f"numShufflePartitions={so.get('numShufflePartitions')} numStateStoreInstances={so.get('numStateStoreInstances')}", flush=True)
        if not same or bad or so.get("numStateStoreInstances") != m:
            ok = False
print("ORACLE ALL OK" if ok else "ORACLE FAILED", flush=True)
spark.stop()
