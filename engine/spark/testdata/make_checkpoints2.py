import json, os, sys, time, shutil, traceback
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
base = sys.argv[1]
spark = (SparkSession.builder.master("local[2]")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.streaming.stateStore.minDeltasForSnapshot", "2")
         .config("spark.sql.streaming.stateStore.maintenanceInterval", "1s")
         .config("spark.sql.streaming.statefulOperator.checkCorrectness.enabled", "false")
         .getOrCreate())
schema = "k string, n int, id long, v double, ts timestamp"
def write_batch(indir, b, nkeys=40, salt=0):
    os.makedirs(indir, exist_ok=True)
    with open(f"{indir}/b{b}.json", "w") as f:
        for i in range(nkeys):
            j = (i * 7 + b * 3 + salt) % (nkeys + 10)
            f.write(json.dumps({"k": f"k{j}", "n": j % 3, "id": j * 1000003, "v": j / 4,
                                "ts": f"2026-01-01T00:{(b*5 + i % 4):02d}:00"}) + "\n")
def run(name, build, mode, two=False, batches=3):
    ck = f"{base}/{name}"
    shutil.rmtree(ck, ignore_errors=True)
    dirs = [f"{base}/{name}-in", f"{base}/{name}-in2"]
    for d in dirs: shutil.rmtree(d, ignore_errors=True)
    try:
        for b in range(batches):
            write_batch(dirs[0], b)
            write_batch(dirs[1], b, salt=5)
            dfs = [spark.readStream.schema(schema).json(d) for d in dirs]
            q = build(*dfs).writeStream.format("noop").outputMode(mode).option("checkpointLocation", ck).trigger(availableNow=True).start()
            q.awaitTermination()
            time.sleep(2.5)
        print("done", name, flush=True)
    except Exception:
        traceback.print_exc()
        print("failed", name, flush=True)
def join(l, r):
    return l.select("k", F.col("v").alias("lv")).join(r.select("k", F.col("n").alias("rn")), "k")
def session(l, r):
    return l.withWatermark("ts", "10 minutes").groupBy(F.session_window("ts", "5 minutes"), "k").count()
def dedup_wm(l, r):
    return l.withWatermark("ts", "10 minutes").dropDuplicatesWithinWatermark(["k"])
def two_ops(l, r):
    return l.dropDuplicates(["k", "n"]).groupBy("k").count()
import pandas as pd
from pyspark.sql.streaming.state import GroupStateTimeout
def pandas_state(l, r):
    def f(key, pdfs, state):
        total = state.get[0] if state.exists else 0
        for pdf in pdfs:
            total += len(pdf)
        state.update((total,))
        yield pd.DataFrame({"k": [key[0]], "c": [total]})
    return l.groupBy("k").applyInPandasWithState(f, "k string, c long", "c long", "Update", GroupStateTimeout.NoTimeout)
for name, b, mode in [("join", join, "append"), ("session", session, "append"), ("dedup_wm", dedup_wm, "append"),
                      ("two_ops", two_ops, "update"), ("pandas_state", pandas_state, "update")]:
    run(name, b, mode)
spark.stop()
