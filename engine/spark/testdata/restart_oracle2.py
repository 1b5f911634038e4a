"""Spark restart oracle for engine/spark.Rewrite (pyspark 4.3.0, Java 17).

Usage: REBUCKET_SPARK_REWRITE=<prog> python restart_oracle2.py <checkpoints dir> <out dir>
<prog> is called as "<prog> rewrite SRC DST M" (a thin driver of
engine/spark.Rewrite; with the CLI wired: rebucket rewrite SRC --buckets M
--out DST). The checkpoints dir is what make_checkpoints*.py wrote (with the
*-in input dirs). Each checkpoint is rewritten 2->8 and 2->3, restarted on a
new input file, and compared (see FORMAT.md). Prints ORACLE... lines.
"""
import json, os, sys, subprocess, shutil
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
base = sys.argv[1]; out = sys.argv[2]
os.makedirs(out, exist_ok=True)
spark = (SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "2")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.streaming.statefulOperator.checkCorrectness.enabled", "false").getOrCreate())
schema = "k string, n int, id long, v double, ts timestamp"
def write_batch(indir, b, nkeys=40, salt=0):
    with open(f"{indir}/b{b}.json", "w") as f:
        for i in range(nkeys):
            j = (i * 7 + b * 3 + salt) % (nkeys + 10)
            f.write(json.dumps({"k": f"k{j}", "n": j % 3, "id": j * 1000003, "v": j / 4,
                                "ts": f"2026-01-01T00:{(b*5 + i % 4):02d}:00"}) + "\n")
def join(l, r):
    return l.select("k", F.col("v").alias("lv")).join(r.select("k", F.col("n").alias("rn")), "k")
def session(l, r):
    return l.withWatermark("ts", "10 minutes").groupBy(F.session_window("ts", "5 minutes"), "k").count()
def dedup_wm(l, r):
    return l.withWatermark("ts", "10 minutes").dropDuplicatesWithinWatermark(["k"])
def two_ops(l, r):
    return l.dropDuplicates(["k", "n"]).groupBy("k").count()
cases = {"join": (join, "append"), "session": (session, "append"), "dedup_wm": (dedup_wm, "append"), "two_ops": (two_ops, "update")}
ok = True
for name, (build, mode) in cases.items():
    dirs = [f"{base}/{name}-in", f"{base}/{name}-in2"]
    write_batch(dirs[0], 3); write_batch(dirs[1], 3, salt=5)
    # Reference: the same streaming query from scratch over all the input, unrebucketed, 2 partitions.
    # Reference: the original checkpoint, not rebucketed, restarted on the same new input.
    refck = f"{out}/{name}-ref"; shutil.rmtree(refck, ignore_errors=True)
    shutil.copytree(f"{base}/{name}", refck)
    results = {}
    for label, ck, m in [("ref", refck, None), ("m8", f"{out}/{name}-8", 8), ("m3", f"{out}/{name}-3", 3)]:
        if m:
            shutil.rmtree(ck, ignore_errors=True)
            r = subprocess.run([os.environ.get("REBUCKET_SPARK_REWRITE", "rebucket-spark-rewrite"), "rewrite", f"{base}/{name}", ck, str(m)], capture_output=True, text=True)
            if r.returncode != 0:
                print("REWRITE FAILED", name, m, r.stderr, flush=True); ok = False; continue
        dfs = [spark.readStream.schema(schema).json(d) for d in dirs]
        q = build(*dfs).writeStream.format("noop").outputMode(mode).option("checkpointLocation", ck).trigger(availableNow=True).start()
        q.awaitTermination()
        so = q.lastProgress["stateOperators"] if q.lastProgress else []
        # Compare the final state of every operator/store via Spark's own statestore reader.
        st = {}
        meta = spark.read.format("state-metadata").load(ck).collect()
        for row in meta:
            df = spark.read.format("statestore").option("operatorId", row["operatorId"]).option("storeName", row["stateStoreName"]).load(ck)
            rows = sorted((json.dumps(r["key"].asDict(recursive=True), default=str, sort_keys=True), json.dumps(r["value"].asDict(recursive=True) if r["value"] else None, default=str, sort_keys=True)) for r in df.collect())
            st[(row["operatorId"], row["stateStoreName"])] = rows
            if m:
                pids = set(r["partition_id"] for r in df.select("partition_id").collect())
                if pids and max(pids) >= m:
                    ok = False
        results[label] = (st, [(o.get("numShufflePartitions"), o.get("numStateStoreInstances")) for o in so])
    ref = results.get("ref")
    for label in ("m8", "m3"):
        if label not in results: continue
        st, parts = results[label]
        same = st == ref[0]
        print(f"ORACLE2 {name} {label}: same_state_as_reference={same} stores={ {k: len(v) for k, v in st.items()} } progress={parts}", flush=True)
        if not same: ok = False
print("ORACLE2 ALL OK" if ok else "ORACLE2 FAILED", flush=True)
spark.stop()
